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

// Both servers store an Event under /registry/events/<namespace>/<name> as
// core/v1 protobuf in the "k8s\x00" envelope (runtime.Unknown carrying
// apiVersion and kind), attached to an etcd lease of --event-ttl; the
// etcd3 store reuses one lease for up to 60 s and 1000 objects
// (k8s.io/apiserver pkg/storage/etcd3/lease_manager.go). Writing that
// layout straight to etcd gives both servers the same store to read.

const (
	eventsPrefix = "/registry/events/"
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

func eventKey(ns, name string) string { return eventsPrefix + ns + "/" + name }

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
func putIfAbsent(ctx context.Context, c *clientv3.Client, key string, value []byte, lease clientv3.LeaseID) error {
	resp, err := c.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%s already exists", key)
	}
	return nil
}

// newEtcdClient dials etcd as the server's own clients do (pkg/etcdclient).
func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	return etcdclient.New(storagebackend.TransportConfig{ServerList: endpoints},
		etcdclient.WithDialTimeout(10*time.Second))
}
