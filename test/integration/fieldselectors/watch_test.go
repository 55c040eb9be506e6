package fieldselectors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// fsWatchNamespace holds the Events of the watch script.
const fsWatchNamespace = "fs-watch"

// fsWatchWait bounds every wait for a watch to deliver.
const fsWatchWait = 20 * time.Second

// The script's Events. A starts about pod-w and moves away; B starts about
// another pod and moves to pod-w; C is about a ReplicaSet and names pod-w as
// related until it is updated not to; S, created last, matches every watch:
// once a watch has delivered S it has delivered everything before it, so
// "nothing for a non-matching change" needs no sleep.
const (
	fswA = "fsw-a"
	fswB = "fsw-b"
	fswC = "fsw-c"
	fswS = "fsw-s"
)

// fsSeen is one delivered change: its type, the Event's name and the reason
// of the object delivered (for a DELETED caused by an update, the state
// before the update, as kube's watchers send it).
type fsSeen string

func fsSaw(typ watch.EventType, name, reason string) fsSeen {
	return fsSeen(fmt.Sprintf("%s %s %s", typ, name, reason))
}

// fsWatchSpec is one watch opened before the script runs and every change
// it must deliver, in order.
type fsWatchSpec struct {
	name      string
	version   string
	namespace string // "" watches all namespaces
	selector  string
	// kube is set when kube-apiserver v1.36.3 supports the selector.
	kube bool
	want []fsSeen
}

var (
	fsAddedA        = fsSaw(watch.Added, fswA, "Watched")
	fsModifiedA     = fsSaw(watch.Modified, fswA, "Watched")
	fsModifiedAMove = fsSaw(watch.Modified, fswA, "Moved")
	fsAddedSentinel = fsSaw(watch.Added, fswS, "Watched")
)

// fsWatchSpecs are the watches of the script (see fsWatchScript for the
// steps the comments number).
var fsWatchSpecs = []fsWatchSpec{
	{
		name: "core reason", version: fsCore, namespace: fsWatchNamespace, selector: "reason=Watched", kube: true,
		want: []fsSeen{
			fsAddedA,                               // 2 create A
			fsModifiedA,                            // 3 update A's message
			fsSaw(watch.Deleted, fswA, "Watched"),  // 4 A's reason changes: it stops matching
			fsSaw(watch.Added, fswB, "Watched"),    // 5 B's reason changes: it starts matching
			fsSaw(watch.Modified, fswB, "Watched"), // 6 B's type
			fsSaw(watch.Modified, fswB, "Watched"), // 9 B's involvedObject
			fsSaw(watch.Deleted, fswB, "Watched"),  // 10 delete B
			fsAddedSentinel,                        // 11
		},
	},
	{
		name: "events reason all namespaces", version: fsEvents, selector: "reason=Watched", kube: true,
		want: []fsSeen{
			fsAddedA, fsModifiedA, fsSaw(watch.Deleted, fswA, "Watched"),
			fsSaw(watch.Added, fswB, "Watched"), fsSaw(watch.Modified, fswB, "Watched"), fsSaw(watch.Modified, fswB, "Watched"),
			fsSaw(watch.Deleted, fswB, "Watched"), fsAddedSentinel,
		},
	},
	{
		name: "events regardingOrRelated.uid", version: fsEvents, namespace: fsWatchNamespace, selector: "regardingOrRelated.uid=uid-pod-w",
		want: []fsSeen{
			fsAddedA,                              // 2
			fsSaw(watch.Added, fswC, "Other"),     // 2 create C, related to pod-w
			fsModifiedA,                           // 3
			fsModifiedAMove,                       // 4 still about pod-w
			fsSaw(watch.Deleted, fswC, "Other"),   // 7 C's related is removed
			fsSaw(watch.Deleted, fswA, "Moved"),   // 8 A moves to pod-x
			fsSaw(watch.Added, fswB, "Watched"),   // 9 B moves to pod-w
			fsSaw(watch.Deleted, fswB, "Watched"), // 10
			fsAddedSentinel,                       // 11
		},
	},
	{
		name: "core involvedObjectOrRelated.uid all namespaces", version: fsCore, selector: "involvedObjectOrRelated.uid=uid-pod-w",
		want: []fsSeen{
			fsAddedA, fsSaw(watch.Added, fswC, "Other"), fsModifiedA, fsModifiedAMove,
			fsSaw(watch.Deleted, fswC, "Other"), fsSaw(watch.Deleted, fswA, "Moved"),
			fsSaw(watch.Added, fswB, "Watched"), fsSaw(watch.Deleted, fswB, "Watched"), fsAddedSentinel,
		},
	},
	{
		name: "events regardingOrRelated.name all namespaces", version: fsEvents, selector: "regardingOrRelated.name=pod-w",
		want: []fsSeen{
			fsAddedA, fsSaw(watch.Added, fswC, "Other"), fsModifiedA, fsModifiedAMove,
			fsSaw(watch.Deleted, fswC, "Other"), fsSaw(watch.Deleted, fswA, "Moved"),
			fsSaw(watch.Added, fswB, "Watched"), fsSaw(watch.Deleted, fswB, "Watched"), fsAddedSentinel,
		},
	},
	{
		name: "core kubectl describe pod", version: fsCore, namespace: fsWatchNamespace, kube: true,
		selector: "involvedObject.name=pod-w,involvedObject.namespace=fs-watch,involvedObject.uid=uid-pod-w",
		want: []fsSeen{
			fsAddedA, fsModifiedA, fsModifiedAMove,
			fsSaw(watch.Deleted, fswA, "Moved"),   // 8
			fsSaw(watch.Added, fswB, "Watched"),   // 9
			fsSaw(watch.Deleted, fswB, "Watched"), // 10
			fsAddedSentinel,
		},
	},
	{
		// What `kubectl events --for pod/pod-w --watch` sends; it pins
		// involvedObject.name, the cache's trigger field.
		name: "core kubectl events for pod", version: fsCore, namespace: fsWatchNamespace, kube: true,
		selector: "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=pod-w",
		want: []fsSeen{
			fsAddedA, fsModifiedA, fsModifiedAMove, fsSaw(watch.Deleted, fswA, "Moved"),
			fsSaw(watch.Added, fswB, "Watched"), fsSaw(watch.Deleted, fswB, "Watched"), fsAddedSentinel,
		},
	},
	{
		name: "events regarding.uid", version: fsEvents, namespace: fsWatchNamespace, selector: "regarding.uid=uid-pod-w", kube: true,
		want: []fsSeen{
			fsAddedA, fsModifiedA, fsModifiedAMove, fsSaw(watch.Deleted, fswA, "Moved"),
			fsSaw(watch.Added, fswB, "Watched"), fsSaw(watch.Deleted, fswB, "Watched"), fsAddedSentinel,
		},
	},
	{
		// Nothing until B turns Warning at step 6.
		name: "events type!=Normal", version: fsEvents, namespace: fsWatchNamespace, selector: "type!=Normal", kube: true,
		want: []fsSeen{
			fsSaw(watch.Added, fswB, "Watched"),    // 6
			fsSaw(watch.Modified, fswB, "Watched"), // 9
			fsSaw(watch.Deleted, fswB, "Watched"),  // 10
			fsAddedSentinel,
		},
	},
}

// TestFieldSelectorWatch opens watches with field selectors, both versions,
// plain and OR labels, on one server, runs a script of creates, updates and
// deletes, and checks that each watch delivers exactly its changes.
func TestFieldSelectorWatch(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	client := framework.UnthrottledClient(t, server.Config(t))
	got := fsRunWatchScript(t, client, fsWatchSpecs, false)
	for _, spec := range fsWatchSpecs {
		t.Run(spec.name, func(t *testing.T) {
			if !slices.Equal(got[spec.name], spec.want) {
				t.Errorf("%s watch ?fieldSelector=%s (%s) delivered\n%s\nwant\n%s", spec.version, spec.selector,
					fsScope(spec.namespace), fsLines(got[spec.name]), fsLines(spec.want))
			}
		})
	}
}

func fsLines(seen []fsSeen) string {
	var b strings.Builder
	for _, s := range seen {
		b.WriteString("  " + string(s) + "\n")
	}
	return b.String()
}

// fsWatchEvent is a core/v1 Event of the script.
func fsWatchEvent(name, pod, reason string) *corev1.Event {
	stamp := metav1.NewTime(time.Now().Truncate(time.Second))
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: fsWatchNamespace, Name: name},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: fsWatchNamespace, Name: pod, UID: types.UID("uid-" + pod), APIVersion: "v1"},
		Reason:              reason,
		Message:             "first message",
		Source:              corev1.EventSource{Component: "fs-test"},
		FirstTimestamp:      stamp,
		LastTimestamp:       stamp,
		Count:               1,
		Type:                corev1.EventTypeNormal,
		ReportingController: "fs-test",
	}
}

// fsWatchEventsV1 is an events.k8s.io/v1 Event of the script.
func fsWatchEventsV1(name string, regarding corev1.ObjectReference, related *corev1.ObjectReference, reason, typ string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: fsWatchNamespace, Name: name},
		EventTime:           metav1.NewMicroTime(time.Now().Truncate(time.Microsecond)),
		ReportingController: "example.com/fs-test",
		ReportingInstance:   "fs-test-1",
		Action:              "Testing",
		Reason:              reason,
		Regarding:           regarding,
		Related:             related,
		Note:                "note",
		Type:                typ,
	}
}

// fsWatchScript is the sequence of writes; each step is numbered as in the
// comments of fsWatchSpecs. Updates go through core/v1, which lets every
// field change (events.k8s.io/v1 does not).
func fsWatchScript(ctx context.Context, client kubernetes.Interface) []struct {
	name string
	do   func() error
} {
	events := client.CoreV1().Events(fsWatchNamespace)
	create := func(e *corev1.Event) func() error {
		return func() error { _, err := events.Create(ctx, e, metav1.CreateOptions{}); return err }
	}
	update := func(name string, change func(*corev1.Event)) func() error {
		return func() error {
			e, err := events.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(e)
			_, err = events.Update(ctx, e, metav1.UpdateOptions{})
			return err
		}
	}
	pod := func(name string) corev1.ObjectReference {
		return corev1.ObjectReference{Kind: "Pod", Namespace: fsWatchNamespace, Name: name, UID: types.UID("uid-" + name), APIVersion: "v1"}
	}
	return []struct {
		name string
		do   func() error
	}{
		{"1 create B, matching nothing", create(fsWatchEvent(fswB, "pod-other", "Other"))},
		{"2 create A", create(fsWatchEvent(fswA, "pod-w", "Watched"))},
		{"2 create C through events.k8s.io/v1, related to pod-w", func() error {
			rs := corev1.ObjectReference{Kind: "ReplicaSet", Namespace: fsWatchNamespace, Name: "rs-w", UID: "uid-rs-w", APIVersion: "apps/v1"}
			related := pod("pod-w")
			_, err := client.EventsV1().Events(fsWatchNamespace).Create(ctx,
				fsWatchEventsV1(fswC, rs, &related, "Other", corev1.EventTypeNormal), metav1.CreateOptions{})
			return err
		}},
		{"3 update A's message", update(fswA, func(e *corev1.Event) { e.Message = "second message" })},
		{"4 update A's reason", update(fswA, func(e *corev1.Event) { e.Reason = "Moved" })},
		{"5 update B's reason", update(fswB, func(e *corev1.Event) { e.Reason = "Watched" })},
		{"6 update B's type", update(fswB, func(e *corev1.Event) { e.Type = corev1.EventTypeWarning })},
		{"7 remove C's related", update(fswC, func(e *corev1.Event) { e.Related = nil })},
		{"8 move A to pod-x", update(fswA, func(e *corev1.Event) { e.InvolvedObject = pod("pod-x") })},
		{"9 move B to pod-w", update(fswB, func(e *corev1.Event) { e.InvolvedObject = pod("pod-w") })},
		{"10 delete B", func() error { return events.Delete(ctx, fswB, metav1.DeleteOptions{}) }},
		{"11 create the sentinel S through events.k8s.io/v1", func() error {
			_, err := client.EventsV1().Events(fsWatchNamespace).Create(ctx,
				fsWatchEventsV1(fswS, pod("pod-w"), nil, "Watched", corev1.EventTypeWarning), metav1.CreateOptions{})
			return err
		}},
	}
}

// fsRunWatchScript opens every watch (each from the resourceVersion of a
// LIST with its selector, as informers do), runs the script, waits until
// every watch has delivered the sentinel, and returns what each delivered,
// keyed by spec name. Changes of Events not in the script (kube-apiserver's
// own) are dropped.
func fsRunWatchScript(t *testing.T, client kubernetes.Interface, specs []fsWatchSpec, createNamespace bool) map[string][]fsSeen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	if createNamespace {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fsWatchNamespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", fsWatchNamespace, err)
		}
	}
	script := map[string]bool{fswA: true, fswB: true, fswC: true, fswS: true}

	var mu sync.Mutex
	got := map[string][]fsSeen{}
	done := map[string]bool{}
	for _, spec := range specs {
		w := fsOpenWatch(ctx, t, client, spec)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-w.ResultChan():
					if !ok {
						mu.Lock()
						got[spec.name] = append(got[spec.name], "watch closed by the server")
						done[spec.name] = true
						mu.Unlock()
						return
					}
					s, name := fsSeenOf(e)
					if name != "" && !script[name] {
						continue
					}
					mu.Lock()
					got[spec.name] = append(got[spec.name], s)
					if s == fsAddedSentinel || e.Type == watch.Error {
						done[spec.name] = true
					}
					mu.Unlock()
				}
			}
		}()
	}

	for _, step := range fsWatchScript(ctx, client) {
		if err := step.do(); err != nil {
			t.Fatalf("step %q: %v", step.name, err)
		}
	}

	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, fsWatchWait, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == len(specs), nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		for _, spec := range specs {
			if !done[spec.name] {
				t.Errorf("watch %q did not deliver the sentinel within %v; it delivered\n%s", spec.name, fsWatchWait, fsLines(got[spec.name]))
			}
		}
	}
	out := map[string][]fsSeen{}
	for name, seen := range got {
		out[name] = slices.Clone(seen)
	}
	return out
}

// fsOpenWatch lists with the spec's selector and watches from the list's
// resourceVersion.
func fsOpenWatch(ctx context.Context, t *testing.T, client kubernetes.Interface, spec fsWatchSpec) watch.Interface {
	t.Helper()
	opts := metav1.ListOptions{FieldSelector: spec.selector}
	var (
		w   watch.Interface
		rv  string
		err error
	)
	switch spec.version {
	case fsCore:
		var list *corev1.EventList
		if list, err = client.CoreV1().Events(spec.namespace).List(ctx, opts); err == nil {
			rv = list.ResourceVersion
			opts.ResourceVersion = rv
			w, err = client.CoreV1().Events(spec.namespace).Watch(ctx, opts)
		}
	case fsEvents:
		var list *eventsv1.EventList
		if list, err = client.EventsV1().Events(spec.namespace).List(ctx, opts); err == nil {
			rv = list.ResourceVersion
			opts.ResourceVersion = rv
			w, err = client.EventsV1().Events(spec.namespace).Watch(ctx, opts)
		}
	}
	if err != nil {
		t.Fatalf("watch %q (%s ?fieldSelector=%s, from %q): %v", spec.name, spec.version, spec.selector, rv, err)
	}
	return w
}

// fsSeenOf reduces a watch event; name is empty for errors and bookmarks.
func fsSeenOf(e watch.Event) (fsSeen, string) {
	switch obj := e.Object.(type) {
	case *corev1.Event:
		return fsSaw(e.Type, obj.Name, obj.Reason), obj.Name
	case *eventsv1.Event:
		return fsSaw(e.Type, obj.Name, obj.Reason), obj.Name
	case *metav1.Status:
		return fsSeen(fmt.Sprintf("%s %d %s %q", e.Type, obj.Code, obj.Reason, obj.Message)), ""
	}
	return fsSeen(fmt.Sprintf("%s %T", e.Type, e.Object)), ""
}
