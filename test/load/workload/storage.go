package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
)

// Both servers store an Event under <--etcd-prefix>/events/<namespace>/<name>
// (the prefix is /registry by default) as core/v1 protobuf in the "k8s\x00"
// envelope (runtime.Unknown carrying apiVersion and kind), attached to an
// etcd lease of --event-ttl; the etcd3 store reuses one lease for up to
// 60 s and 1000 objects (k8s.io/apiserver pkg/storage/etcd3/lease_manager.go).
// Writing that layout straight to etcd gives both servers the same store to
// read.

const (
	// DefaultPrefix is both servers' default --etcd-prefix.
	DefaultPrefix = "/registry"
	// leaseReuse and leaseMaxObjects are the etcd3 lease manager's defaults.
	leaseReuse      = 60 * time.Second
	leaseMaxObjects = 1000
)

var storageEncoder = scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)

// storedValue is the etcd value a server writes for ev on create: ev with
// the fields the server fills in (uid, creationTimestamp, managedFields of
// the creating client), no resourceVersion.
func storedValue(ev *corev1.Event, created time.Time) ([]byte, error) {
	ev = ev.DeepCopy()
	ev.UID = podUID(ev.Namespace, "event/"+ev.Name)
	ev.CreationTimestamp = metav1.NewTime(created)
	ev.ResourceVersion = ""
	ev.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager:    "kubelet",
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1",
		Time:       &ev.CreationTimestamp,
		FieldsType: "FieldsV1",
		FieldsV1:   metav1.NewFieldsV1(kubeletManagedFields),
	}}
	return runtime.Encode(storageEncoder, ev)
}

// kubeletManagedFields is the field set of a tools/record create.
const kubeletManagedFields = `{"f:count":{},"f:firstTimestamp":{},"f:involvedObject":{},"f:lastTimestamp":{},"f:message":{},"f:reason":{},"f:reportingComponent":{},"f:reportingInstance":{},"f:source":{"f:component":{},"f:host":{}},"f:type":{}}`

// eventKey is where a server with --etcd-prefix=prefix stores Event
// ns/name.
func eventKey(prefix, ns, name string) string { return prefix + "/events/" + ns + "/" + name }

// leaser hands out leases the way the etcd3 lease manager does: one lease
// of ttl+60s, reused for 60 s or 1000 objects.
type leaser struct {
	client *clientv3.Client
	ttl    time.Duration

	mu      sync.Mutex
	id      clientv3.LeaseID
	expires time.Time
	count   int
}

func (l *leaser) get(ctx context.Context) (clientv3.LeaseID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.count++
	if l.id != 0 && now.Add(l.ttl).Before(l.expires) && l.count <= leaseMaxObjects {
		return l.id, nil
	}
	ttl := l.ttl + leaseReuse
	resp, err := l.client.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return 0, err
	}
	l.id, l.expires, l.count = resp.ID, now.Add(ttl), 1
	return l.id, nil
}

// putIfAbsent is the etcd3 store's create: a transaction that writes key
// with the lease only if it does not exist (OptimisticPut at revision 0).
// It returns the revision written, the resourceVersion a server answers.
func putIfAbsent(ctx context.Context, c *clientv3.Client, key string, value []byte, lease clientv3.LeaseID) (int64, error) {
	resp, err := c.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%s already exists", key)
	}
	return resp.Header.Revision, nil
}

// EtcdEvents creates core/v1 Events straight in etcd, each as a server
// with --etcd-prefix=Prefix creates it (key, value, lease, transaction):
// the server then lists and watches them as its own, without the CPU its
// create would cost.
type EtcdEvents struct {
	client *clientv3.Client
	leases *leaser
	prefix string
}

// NewEtcdEvents dials etcd at endpoints for a server whose --etcd-prefix
// is prefix (DefaultPrefix unless set), its Events with leases of EventTTL.
func NewEtcdEvents(endpoints []string, prefix string) (*EtcdEvents, error) {
	c, err := newEtcdClient(endpoints)
	if err != nil {
		return nil, err
	}
	return &EtcdEvents{client: c, leases: &leaser{client: c, ttl: EventTTL}, prefix: prefix}, nil
}

// Create stores ev (a new Event, its namespace set) as the etcd3 store's
// create does, and returns its resourceVersion and the stored value's size.
func (e *EtcdEvents) Create(ctx context.Context, ev *corev1.Event) (revision int64, size int, err error) {
	value, err := storedValue(ev, ev.FirstTimestamp.Time)
	if err != nil {
		return 0, 0, err
	}
	lease, err := e.leases.get(ctx)
	if err != nil {
		return 0, 0, err
	}
	revision, err = putIfAbsent(ctx, e.client, eventKey(e.prefix, ev.Namespace, ev.Name), value, lease)
	return revision, len(value), err
}

func (e *EtcdEvents) Close() error { return e.client.Close() }

// newEtcdClient dials etcd as the server's own clients do (pkg/etcdclient).
func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	return etcdclient.New(storagebackend.TransportConfig{ServerList: endpoints},
		etcdclient.WithDialTimeout(10*time.Second))
}
