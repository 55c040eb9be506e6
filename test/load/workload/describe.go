package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// describeChunk is kubectl's --chunk-size default (cmdutil.DefaultChunkSize).
const describeChunk = 500

// Query is one of the Event LISTs people run while debugging, aimed at a
// pod of the preloaded store.
type Query struct {
	// Name is the row label, e.g. "describe pod".
	Name string
	// AllNamespaces lists /api/v1/events instead of the pod's namespace.
	AllNamespaces bool
	// Selector is the field selector for the pod's reference.
	Selector func(ns, name, uid string) string
	// Pair selects the Events of two pods, p and the next, with a
	// set-based selector (event-apiserver only): Selector is not used.
	Pair func(a, b corev1.ObjectReference) string
}

// Queries are the LISTs the describe workload times:
//   - kubectl describe pod: client-go's GetFieldSelector(name, namespace,
//     nil, uid) in the pod's namespace (kubectl/pkg/describe searchEvents);
//   - kubectl events --for pod/x: kind, apiVersion, name, in the namespace,
//     and with -A across all namespaces (kubectl/pkg/cmd/events);
//   - kubectl get events -A --field-selector involvedObject.uid=u;
//   - the same for two pods at once, `involvedObject.uid in (u1,u2)`
//     (event-apiserver's set-based selectors; skipped on kube-apiserver).
//
// All are core/v1 with limit 500, following continue tokens, as kubectl
// sends them (JSON).
var Queries = []Query{
	{Name: "describe pod", Selector: func(ns, name, uid string) string {
		return fmt.Sprintf("involvedObject.name=%s,involvedObject.namespace=%s,involvedObject.uid=%s", name, ns, uid)
	}},
	{Name: "events --for", Selector: eventsForSelector},
	{Name: "events -A --for", AllNamespaces: true, Selector: eventsForSelector},
	{Name: "get -A uid", AllNamespaces: true, Selector: func(_, _, uid string) string {
		return "involvedObject.uid=" + uid
	}},
	{Name: "get -A uid in", AllNamespaces: true, Pair: func(a, b corev1.ObjectReference) string {
		return fmt.Sprintf("involvedObject.uid in (%s,%s)", a.UID, b.UID)
	}},
}

func eventsForSelector(_, name, _ string) string {
	return "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=" + name
}

// DescribeOptions configures Describe.
type DescribeOptions struct {
	Layout Layout
	// Size is how many Events of the layout the store holds (preloaded).
	Size int
	// Requests is the most requests per query; default 20.
	Requests int
	// MaxTime bounds the time per query (at least 3 requests run
	// whatever it takes); default 3s.
	MaxTime time.Duration
}

// minDescribeRequests run even past MaxTime, so every query has a median.
const minDescribeRequests = 3

// Describe times each of Queries, one request at a time, against a store
// of Size preloaded Events, and checks every answer holds the pod's
// EventsPerPod Events.
func Describe(ctx context.Context, t Target, o DescribeOptions) ([]Measurement, error) {
	if o.Requests <= 0 {
		o.Requests = 20
	}
	if o.MaxTime <= 0 {
		o.MaxTime = 3 * time.Second
	}
	pods := o.Size / o.Layout.EventsPerPod // whole pods only
	if pods == 0 {
		return nil, fmt.Errorf("a store of %d Events has no pod with %d Events", o.Size, o.Layout.EventsPerPod)
	}
	cs, _, err := t.client(JSON)
	if err != nil {
		return nil, err
	}
	if err := WaitForStore(ctx, cs, o.Layout, o.Size); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(o.Size), 42))
	var out []Measurement
	for _, q := range Queries {
		if q.Pair != nil && (!t.SetSelectors || pods < 2) {
			continue
		}
		want := o.Layout.EventsPerPod
		if q.Pair != nil {
			want *= 2
		}
		lat := &Latencies{}
		var failed int64
		var firstErr error
		start := time.Now()
		for i := 0; i < o.Requests && (i < minDescribeRequests || time.Since(start) < o.MaxTime); i++ {
			p := rng.IntN(pods)
			t0 := time.Now()
			n, err := listAll(ctx, cs, q, o.Layout, p, pods)
			d := time.Since(t0)
			if err == nil && n != want {
				err = fmt.Errorf("%s for %s: %d Events, want %d", q.Name, o.Layout.Pod(p), n, want)
			}
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			lat.Add(d)
		}
		if firstErr != nil {
			klog.InfoS("Describe failed", "query", q.Name, "size", o.Size, "failed", failed, "err", firstErr)
		}
		name := fmt.Sprintf("%s @%d", q.Name, o.Size)
		n := int64(lat.Len())
		out = append(out,
			Measurement{Workload: "describe", Metric: name + " p50", Unit: "ms", Value: ms(lat.Percentile(50)), Better: Lower, Count: n, Errors: failed},
			Measurement{Workload: "describe", Metric: name + " p99", Unit: "ms", Value: ms(lat.Percentile(99)), Better: Lower, Count: n, Errors: failed},
		)
	}
	return out, nil
}

// listAll runs q for pod p, following continue tokens, and returns how
// many Events came back.
func listAll(ctx context.Context, cs kubernetes.Interface, q Query, l Layout, p, pods int) (int, error) {
	ref := l.PodRef(p)
	ns := ref.Namespace
	if q.AllNamespaces {
		ns = ""
	}
	opts := metav1.ListOptions{Limit: describeChunk}
	if q.Pair != nil {
		opts.FieldSelector = q.Pair(ref, l.PodRef((p+1)%pods))
	} else {
		opts.FieldSelector = q.Selector(ref.Namespace, ref.Name, string(ref.UID))
	}
	n := 0
	for {
		list, err := cs.CoreV1().Events(ns).List(ctx, opts)
		if err != nil {
			return n, err
		}
		n += len(list.Items)
		if list.Continue == "" {
			return n, nil
		}
		opts.Continue = list.Continue
	}
}

// WaitForStore waits (up to 5 minutes) until the server answers for the
// last whole pod of a store of size Events, i.e. its watch cache, if any,
// has caught up with the preload.
func WaitForStore(ctx context.Context, cs kubernetes.Interface, l Layout, size int) error {
	p := size/l.EventsPerPod - 1
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := listAll(ctx, cs, Queries[0], l, p, p+1)
		if err == nil && n != l.EventsPerPod {
			err = fmt.Errorf("%d Events for %s, want %d", n, l.Pod(p), l.EventsPerPod)
		}
		last = err
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the server to see %d Events: %w (last: %v)", size, err, last)
	}
	return nil
}

// FirstServed polls (every 50 ms, without client-go's retries) the
// describe LIST of the last whole pod of a store of size Events until it
// answers 200 with all the pod's Events, and returns how long after since
// that was: a server can report ready while its watch cache is still
// filling and answer 429 meanwhile.
func FirstServed(ctx context.Context, t Target, l Layout, size int, since time.Time) (time.Duration, error) {
	client, err := rest.HTTPClientFor(t.Config)
	if err != nil {
		return 0, err
	}
	client.Timeout = 30 * time.Second
	ref := l.PodRef(size/l.EventsPerPod - 1)
	u := fmt.Sprintf("%s/api/v1/namespaces/%s/events?limit=%d&fieldSelector=%s", t.Config.Host, ref.Namespace, describeChunk,
		url.QueryEscape(Queries[0].Selector(ref.Namespace, ref.Name, string(ref.UID))))
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = listOnce(ctx, client, u, l.EventsPerPod)
		return last == nil, nil
	})
	if err != nil {
		return 0, fmt.Errorf("no describe LIST served: %w (last: %v)", err, last)
	}
	return time.Since(since), nil
}

func listOnce(ctx context.Context, client *http.Client, u string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(body[:min(len(body), 200)]))
	}
	var list corev1.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		return err
	}
	if len(list.Items) != want {
		return fmt.Errorf("%d Events, want %d", len(list.Items), want)
	}
	return nil
}
