package robustness

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestPartitionIsolatesLeader proves the partition fault is one: the leader
// cut off from its peers loses its leadership, the other two elect another
// leader, the isolated member reports itself unhealthy, and healing brings
// it back. Without it, a robustness run with partitions that did nothing
// would pass for the wrong reason.
func TestPartitionIsolatesLeader(t *testing.T) {
	t.Parallel()
	etcd := framework.StartEtcdCluster(t, 3, framework.WithEtcdPeerProxies())
	c := &cluster{t: t, etcd: etcd, etcdClient: etcd.Client(t)}
	ctx := context.Background()
	old := c.leader(ctx)
	if old < 0 {
		t.Fatal("no leader")
	}
	isolated := etcd.Members[old]
	if err := isolated.Partition(); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		now := c.leader(ctx)
		return now >= 0 && now != old && testbed.EtcdHealth(client, isolated.ClientURL()) != nil, nil
	})
	if err != nil {
		t.Fatalf("after partitioning leader %s: leader now %d, its health %v: %v", isolated.Name(), c.leader(ctx),
			testbed.EtcdHealth(client, isolated.ClientURL()), err)
	}
	isolated.Heal()
	if err := etcd.WaitHealthy(time.Minute); err != nil {
		t.Fatalf("after healing: %v", err)
	}
}
