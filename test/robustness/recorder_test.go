package robustness

// etcd's own revision history of the Events prefix, recorded by a raw etcd
// watch started before any traffic: what the checker holds every answer
// against.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/eventapiserver/event-apiserver/test/robustness/checker"
)

const eventsPrefix = "/registry/events/"

var etcdCodec = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

type etcdRecorder struct {
	mu        sync.Mutex
	revisions []checker.Revision
	// progress is the newest revision up to which every change is held.
	progress int64
	err      error
	done     chan struct{}
}

func startRecorder(ctx context.Context, client *clientv3.Client, base int64) *etcdRecorder {
	r := &etcdRecorder{progress: base, done: make(chan struct{})}
	go r.run(ctx, client, base+1)
	return r
}

func (r *etcdRecorder) run(ctx context.Context, client *clientv3.Client, next int64) {
	defer close(r.done)
	for ctx.Err() == nil {
		// WithRequireLeader: a watch on a member cut off from the others
		// is ended, and the next one goes to a member with a leader.
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range client.Watch(wctx, eventsPrefix, clientv3.WithPrefix(), clientv3.WithRev(next),
			clientv3.WithPrevKV(), clientv3.WithProgressNotify()) {
			if resp.CompactRevision != 0 {
				r.fail(fmt.Errorf("etcd recorder: history compacted at %d before it was recorded (next %d)", resp.CompactRevision, next))
				cancel()
				return
			}
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				rev, err := toRevision(ev)
				if err != nil {
					r.fail(err)
					cancel()
					return
				}
				r.mu.Lock()
				r.revisions = append(r.revisions, rev)
				r.progress = rev.Rev
				r.mu.Unlock()
				next = rev.Rev + 1
			}
			if resp.IsProgressNotify() {
				r.mu.Lock()
				r.progress = max(r.progress, resp.Header.Revision)
				r.mu.Unlock()
				next = max(next, resp.Header.Revision+1)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *etcdRecorder) fail(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// Progress is the newest revision the recorder holds everything up to.
func (r *etcdRecorder) Progress() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress
}

func (r *etcdRecorder) result() ([]checker.Revision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.revisions, r.err
}

func toRevision(ev *clientv3.Event) (checker.Revision, error) {
	key := strings.TrimPrefix(string(ev.Kv.Key), eventsPrefix)
	rev := checker.Revision{Rev: ev.Kv.ModRevision, Key: key, Type: checker.Put, Created: ev.IsCreate()}
	value := ev.Kv.Value
	if ev.Type == clientv3.EventTypeDelete {
		rev.Type = checker.Delete
		if ev.PrevKv == nil {
			return rev, fmt.Errorf("etcd recorder: delete of %s at %d without its previous value", key, rev.Rev)
		}
		value = ev.PrevKv.Value
	}
	obj, _, err := etcdCodec.Decode(value, nil, nil)
	if err != nil {
		return rev, fmt.Errorf("etcd recorder: decoding %s at %d: %w", key, rev.Rev, err)
	}
	e, ok := obj.(*corev1.Event)
	if !ok {
		return rev, fmt.Errorf("etcd recorder: %s at %d holds a %T", key, rev.Rev, obj)
	}
	rev.Fields = eventFields(e.Namespace, e.Type, e.Reason)
	return rev, nil
}

// eventFields are the selector fields the checker models; the traffic never
// changes them after create.
func eventFields(namespace, typ, reason string) map[string]string {
	return map[string]string{"metadata.namespace": namespace, "type": typ, "reason": reason}
}
