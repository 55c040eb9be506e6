package watch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestWatchSurvivesEtcdMemberKill kills each etcd member in turn with
// SIGKILL under running watches while Events are written, and restarts it. A raw
// watch either goes on or ends in a way client-go's reflector recovers from
// by resuming (a close or a retriable error, never a 410), and an informer
// sees every Event once, in order, without a relist.
func TestWatchSurvivesEtcdMemberKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster := framework.StartEtcdCluster(t, 3)
	server := framework.StartServer(t, framework.ServerOptions{EtcdServers: cluster.Endpoints()})
	client := server.Client(t)
	const ns = "etcd-failure"

	informer := startCountingInformer(ctx, t, server.Config(t), ns)
	list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw := watchEvents(ctx, t, client, ns, metav1.ListOptions{
		ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](170),
	})
	var rawGot []framework.Seen
	var rawClosed bool
	rawDone := make(chan struct{})
	var created createdEvents
	rawCtx, stopRaw := context.WithCancel(ctx)
	defer stopRaw()
	go func() {
		defer close(rawDone)
		rawGot, rawClosed = framework.Observe(rawCtx, raw, func(got []framework.Seen) bool {
			n := created.count()
			return created.finished() && len(framework.WithPrefix(framework.Changes(got), "e-")) >= n
		})
	}()

	writerCtx, stopWriter := context.WithCancel(ctx)
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		created.write(writerCtx, client, ns)
	}()
	waitCreated := func(n int) {
		t.Helper()
		target := created.count() + n
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true,
			func(context.Context) (bool, error) { return created.count() >= target, nil }); err != nil {
			t.Fatalf("Events stopped being written: %d, want %d", created.count(), target)
		}
	}

	waitCreated(3)
	// Every member in turn, so that one of them carries the watch cache's
	// own etcd watch when it dies.
	for _, member := range cluster.Members {
		leader := etcdLeader(ctx, t, cluster)
		t.Logf("killing etcd %s (leader: %v) after %d Events", member.Name(), member == leader, created.count())
		if err := member.Kill(); err != nil {
			t.Fatal(err)
		}
		waitCreated(3)
		if err := member.Restart(); err != nil {
			t.Fatal(err)
		}
		waitCreated(3)
	}
	stopWriter()
	writer.Wait()
	created.finish()
	names := created.names()
	t.Logf("%d Events written", len(names))

	// The informer has every Event, each added once, in order, without a relist.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true,
		func(context.Context) (bool, error) { return len(informer.added()) >= len(names), nil }); err != nil {
		t.Errorf("informer has %d of %d Events", len(informer.added()), len(names))
	}
	if got := informer.added(); !slices.Equal(got, names) {
		t.Errorf("informer added %v, want %v", got, names)
	}
	t.Logf("informer requests: %v", informer.requests)
	if n := informer.requests.relists() - informer.initialRelists; n != 0 {
		t.Errorf("informer relisted %d times", n)
	}

	select {
	case <-rawDone:
	case <-time.After(30 * time.Second):
		stopRaw()
		<-rawDone
	}
	rawChanges := framework.WithPrefix(framework.Changes(rawGot), "e-")
	t.Logf("raw watch: %d of %d Events, closed by server: %v, errors: %v", len(rawChanges), len(names), rawClosed, framework.OfType(rawGot, watch.Error))
	if g := framework.Gone(rawGot); len(g) > 0 {
		t.Fatalf("raw watch ended with %v: a reflector would relist", g)
	}
	if errs := framework.OfType(rawGot, watch.Error); len(errs) > 0 {
		t.Errorf("raw watch ended with %v: a reflector relists after any error event but 429", errs)
	}
	if rawClosed {
		// The reflector resumes from its last resource version.
		rv := framework.LastRV(rawGot, list.ResourceVersion)
		rest := names[len(rawChanges):]
		w := watchEvents(ctx, t, client, ns, metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: ptr.To[int64](30)})
		watchCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		got, _ := framework.Observe(watchCtx, w, framework.HasChanges(len(rest)))
		t.Logf("raw watch resumed from %s: %v", rv, got)
		if g := framework.Gone(got); len(g) > 0 {
			t.Fatalf("resume from %s: %v", rv, g)
		}
		rawChanges = append(rawChanges, framework.Changes(got)...)
	}
	var rawNames []string
	for _, s := range rawChanges {
		rawNames = append(rawNames, s.Name)
	}
	if !slices.Equal(rawNames, names) {
		t.Errorf("raw watch saw %v, want %v", rawNames, names)
	}
}

// etcdLeader is the member that reports itself as leader.
func etcdLeader(ctx context.Context, t *testing.T, cluster *framework.EtcdCluster) *framework.Etcd {
	t.Helper()
	kv := cluster.Client(t)
	var leader *framework.Etcd
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, m := range cluster.Members {
			if !m.Running() {
				continue
			}
			status, err := kv.Status(ctx, m.ClientURL())
			if err == nil && status.Leader != 0 && status.Leader == status.Header.MemberId {
				leader = m
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no etcd leader: %v", err)
	}
	return leader
}

// createdEvents writes Events e-0, e-1, ... one after the other, each
// retried until the server has it, and records them in order.
type createdEvents struct {
	mu   sync.Mutex
	list []string
	done bool
}

func (c *createdEvents) write(ctx context.Context, client kubernetes.Interface, ns string) {
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("e-%03d", i)
		for ctx.Err() == nil {
			reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := client.CoreV1().Events(ns).Create(reqCtx, watchTestEvent(ns, name), metav1.CreateOptions{})
			cancel()
			if err == nil || apierrors.IsAlreadyExists(err) {
				c.mu.Lock()
				c.list = append(c.list, name)
				c.mu.Unlock()
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(150 * time.Millisecond):
		}
	}
}

func (c *createdEvents) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.list)
}

func (c *createdEvents) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

func (c *createdEvents) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
}

func (c *createdEvents) finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// countingInformer is a client-go Event informer whose requests are counted.
type countingInformer struct {
	requests *requestCounter
	informer cache.SharedIndexInformer
	// initialRelists is the count after the first sync (one WatchList, or
	// a LIST where WatchList is not served).
	initialRelists int

	mu     sync.Mutex
	adds   []string
	counts map[string]int
}

// startCountingInformer runs a SharedInformerFactory Event informer in ns
// until the test ends and waits for its first sync.
func startCountingInformer(ctx context.Context, t *testing.T, config *rest.Config, ns string) *countingInformer {
	t.Helper()
	inf := &countingInformer{requests: &requestCounter{}, counts: map[string]int{}}
	config = rest.CopyConfig(config)
	config.Wrap(inf.requests.wrap)
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	events := factory.Core().V1().Events().Informer()
	inf.informer = events
	if _, err := events.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			e := obj.(*corev1.Event)
			inf.mu.Lock()
			defer inf.mu.Unlock()
			inf.adds = append(inf.adds, e.Name)
			inf.counts[e.Name]++
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), events.HasSynced) {
		t.Fatal("informer did not sync")
	}
	inf.initialRelists = inf.requests.relists()
	return inf
}

// added is the names the informer added, in order.
func (i *countingInformer) added() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.adds)
}
