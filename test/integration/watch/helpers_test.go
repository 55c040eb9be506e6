package watch

// Helpers for the watch_*_test.go tests: watches read into plain records,
// Events and other keys written straight into etcd (as another API server
// would while ours is down), /metrics samples, request counting for relists,
// and the same scenario run against our server and kube-apiserver.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// watchEvents starts a core/v1 Event watch in ns.
func watchEvents(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string, opts metav1.ListOptions) watch.Interface {
	t.Helper()
	w, err := client.CoreV1().Events(ns).Watch(ctx, opts)
	if err != nil {
		t.Fatalf("watch %s from %q: %v", ns, opts.ResourceVersion, err)
	}
	return w
}

// assertChanges checks that got holds exactly want (type and name), in
// order, with increasing resource versions: every change once, in order.
func assertChanges(t *testing.T, what string, got []framework.Seen, want []framework.Seen) {
	t.Helper()
	c := framework.Changes(got)
	ok := len(c) == len(want)
	for i := 0; ok && i < len(c); i++ {
		ok = c[i].Type == want[i].Type && c[i].Name == want[i].Name
	}
	if !ok {
		t.Errorf("%s: got changes %v, want %v", what, c, want)
	}
	for i := 1; i < len(c); i++ {
		if framework.RVInt(t, c[i].RV) <= framework.RVInt(t, c[i-1].RV) {
			t.Errorf("%s: resource versions not increasing: %v", what, c)
			break
		}
	}
}

// watchTestEvent is a core/v1 Event as client-go's record package writes it.
func watchTestEvent(ns, name string) *corev1.Event {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", APIVersion: "v1"},
		Reason:              "Watched",
		Message:             "event " + name,
		Source:              corev1.EventSource{Component: "watch-test"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                corev1.EventTypeNormal,
		ReportingController: "watch-test",
	}
}

// createEvents creates Events through the API and returns them as the
// watch will show them.
func createEvents(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string, names ...string) []framework.Seen {
	t.Helper()
	var out []framework.Seen
	for _, name := range names {
		e, err := client.CoreV1().Events(ns).Create(ctx, watchTestEvent(ns, name), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s/%s: %v", ns, name, err)
		}
		out = append(out, framework.Seen{Type: watch.Added, Name: name, RV: e.ResourceVersion})
	}
	return out
}

// etcdEventCodec encodes Events as kube-apiserver stores them: core/v1
// protobuf in the runtime.Unknown envelope.
var etcdEventCodec = func() runtime.Serializer {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return protobuf.NewSerializer(scheme, scheme)
}()

// putEventInEtcd writes e under /registry/events/<ns>/<name>, as another
// API server would, and returns the revision of the write.
func putEventInEtcd(ctx context.Context, t *testing.T, c *clientv3.Client, e *corev1.Event) int64 {
	t.Helper()
	e = e.DeepCopy()
	e.APIVersion, e.Kind = "v1", "Event"
	if e.UID == "" {
		e.UID = types.UID(fmt.Sprintf("uid-%s-%d", e.Name, time.Now().UnixNano()))
		e.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
	}
	e.ResourceVersion = ""
	data, err := runtime.Encode(etcdEventCodec, e)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Put(ctx, framework.EtcdEventKey(e.Namespace, e.Name), string(data))
	if err != nil {
		t.Fatalf("etcd put %s/%s: %v", e.Namespace, e.Name, err)
	}
	return resp.Header.Revision
}

func deleteEventInEtcd(ctx context.Context, t *testing.T, c *clientv3.Client, ns, name string) int64 {
	t.Helper()
	resp, err := c.Delete(ctx, framework.EtcdEventKey(ns, name))
	if err != nil || resp.Deleted != 1 {
		t.Fatalf("etcd delete %s/%s: %v (deleted %d)", ns, name, err, resp.Deleted)
	}
	return resp.Header.Revision
}

// putOtherKeys writes n keys that are not Events (as other resources
// sharing the etcd would) and returns the revision after the last one.
func putOtherKeys(ctx context.Context, t *testing.T, c *clientv3.Client, n int) int64 {
	t.Helper()
	var rev int64
	for i := range n {
		resp, err := c.Put(ctx, fmt.Sprintf("/registry/other/key-%d", i), time.Now().String())
		if err != nil {
			t.Fatalf("etcd put: %v", err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// etcdRevision is etcd's current revision.
func etcdRevision(ctx context.Context, t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	resp, err := c.Get(ctx, "/registry/other/probe")
	if err != nil {
		t.Fatalf("etcd get: %v", err)
	}
	return resp.Header.Revision
}

// revisionClockKey is the TTL backstop's revision clock (pkg/expiry), a key
// outside the Events that the server itself writes.
const revisionClockKey = "/registry/eventapiserver.io/revision-clock"

// clockSettled waits until the revision clock has taken its sample of the
// writes before it and returns etcd's revision then. The backstop samples
// once per period after other keys change, and not again until something
// else is written: so from here on etcd's revision stays put, even across a
// restart, whose first tick finds nothing new to sample.
func clockSettled(ctx context.Context, t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	var revision, clockWrite int64
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, framework.PollTimeout, true, func(ctx context.Context) (bool, error) {
		resp, err := c.Get(ctx, revisionClockKey)
		if err != nil {
			return false, err
		}
		if len(resp.Kvs) != 1 {
			return false, nil
		}
		revision, clockWrite = resp.Header.Revision, resp.Kvs[0].ModRevision
		return clockWrite == revision, nil
	})
	if err != nil {
		t.Fatalf("the revision clock did not sample the last writes (etcd at %d, clock written at %d): %v", revision, clockWrite, err)
	}
	return revision
}

// resumesFrom reads our counter of watches resumed from a resource version,
// by source ("cache" or "etcd").
func resumesFrom(t *testing.T, config *rest.Config, source string) float64 {
	t.Helper()
	return framework.MetricValue(t, config, "event_apiserver_watch_resumes_total",
		map[string]string{"resource": "events", "source": source})
}

// requestCounter counts the Event requests a client sends, by kind: a LIST,
// a watch with initial events (WatchList: a relist by another name), or a
// watch that resumes from a resource version.
type requestCounter struct {
	mu         sync.Mutex
	lists      int
	watchLists int
	watches    int
	log        []string
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return framework.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/events") {
			q := req.URL.Query()
			c.mu.Lock()
			switch {
			case q.Get("watch") != "true" && q.Get("watch") != "1":
				c.lists++
			case q.Get("sendInitialEvents") == "true":
				c.watchLists++
			default:
				c.watches++
			}
			c.log = append(c.log, time.Now().Format("15:04:05.000")+" "+req.URL.RawQuery)
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// relists is the number of full reads: LISTs and WatchList watches.
func (c *requestCounter) relists() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists + c.watchLists
}

func (c *requestCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d LIST, %d WatchList, %d resuming watches: %s",
		c.lists, c.watchLists, c.watches, strings.Join(c.log, "; "))
}

// apiTarget is one API server serving Events over its own etcd: ours, or
// kube-apiserver v1.36.3 beside it.
type apiTarget struct {
	name   string
	config *rest.Config
	client kubernetes.Interface
	etcd   *clientv3.Client
	// stop sends SIGTERM and waits; kill sends SIGKILL; start starts the
	// stopped server again and waits until it is ready.
	stop, kill, start func() error
	// server is our server; nil for kube-apiserver.
	server *framework.Server
}

// watchShutdownFlag lets a server stopped with SIGTERM end its open watches
// within 2s. Without it kube-apiserver and our server alike wait for them up
// to the request timeout (60s) before exiting, longer than the test
// framework waits before it kills the process.
const watchShutdownFlag = "--shutdown-watch-termination-grace-period=2s"

// startOurTarget runs our server over a fresh external etcd process.
func startOurTarget(t *testing.T) *apiTarget {
	t.Helper()
	etcd := framework.StartEtcd(t)
	server := framework.StartServer(t, framework.ServerOptions{
		EtcdServers: etcd.ClientURL(),
		ExtraArgs:   []string{watchShutdownFlag},
	})
	return &apiTarget{
		name:   "event-apiserver",
		config: server.Config(t),
		client: server.Client(t),
		etcd:   etcd.Client(t),
		stop:   server.Stop,
		kill:   server.Kill,
		start:  server.Start,
		server: server,
	}
}

// startKubeTarget runs kube-apiserver over its own etcd process; nil (and a
// log line) when its binary has not been built.
func startKubeTarget(t *testing.T) *apiTarget {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "_output", "bin", "kube-apiserver")); err != nil {
		t.Log("kube-apiserver not built (hack/build-kube.sh): running our server alone")
		return nil
	}
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{ExtraFlags: []string{watchShutdownFlag}})
	return &apiTarget{
		name:   "kube-apiserver",
		config: kube.RestConfig(),
		client: kube.Client(t),
		etcd:   kube.Etcd.Client(t),
		stop:   kube.Stop,
		kill:   kube.Kill,
		start:  func() error { return kube.Restart() },
	}
}
