package metrics

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// eventsCounted is event_apiserver_events_total's sample with exactly these
// labels (0 when there is none).
func eventsCounted(t *testing.T, config *rest.Config, source, typ, reason, kind, namespace string) float64 {
	t.Helper()
	return framework.MetricValue(t, config, "event_apiserver_events_total", map[string]string{
		"source": source, "type": typ, "reason": reason, "regarding_kind": kind, "regarding_namespace": namespace,
	})
}

// testCtx lasts the test: the recorders run on it, and each wait is
// bounded by framework.PollTimeout on its own.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// waitCounted waits until read gives want.
func waitCounted(ctx context.Context, t *testing.T, what string, want float64, read func() float64) {
	t.Helper()
	var got float64
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
		got = read()
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("%s: counted %v, want %v", what, got, want)
	}
}

// TestEventMetricsWritten: client-go's two recorders write Events through
// the server, and /metrics counts their occurrences (not their writes) by
// type, reason, regarding kind and namespace; dry runs, refused writes and
// writes that raise no count add nothing; a namespace outside
// --event-metrics-namespaces is _other; a storm of invented reasons stays
// within --event-metrics-max-series, its occurrences counted in the fold
// series, and the series held keep counting.
func TestEventMetricsWritten(t *testing.T) {
	t.Parallel()
	const maxSeries = 10
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
		fmt.Sprintf("--event-metrics-max-series=%d", maxSeries), "--event-metrics-namespaces=metrics-a",
	}})
	client := server.Client(t)
	config := server.Config(t)
	ctx := testCtx(t)
	counted := func(typ, reason, kind, namespace string) func() float64 {
		return func() float64 { return eventsCounted(t, config, "written", typ, reason, kind, namespace) }
	}

	// tools/record (kubelets, most controllers): a create, then a PATCH
	// raising count per occurrence.
	crashing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crashing", Namespace: "metrics-a", UID: "uid-metrics-crashing"}}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})
	for i := 1; i <= 3; i++ {
		recorder.Event(crashing, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
		waitCounted(ctx, t, fmt.Sprintf("tools/record occurrence %d", i), float64(i), counted("Warning", "BackOff", "Pod", "metrics-a"))
	}

	// tools/events (the scheduler, controller-runtime): a create, then the
	// second occurrence as series.count 2.
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "metrics-a", UID: types.UID("uid-metrics-pending")}}
	eventsBroadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	defer eventsBroadcaster.Shutdown()
	if err := eventsBroadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	scheduler := eventsBroadcaster.NewRecorder(scheme.Scheme, "example.com/scheduler")
	for i := 1; i <= 2; i++ {
		scheduler.Eventf(pending, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "0/%d nodes are available", 3)
		waitCounted(ctx, t, fmt.Sprintf("tools/events occurrence %d", i), float64(i), counted("Warning", "FailedScheduling", "Pod", "metrics-a"))
	}

	// A namespace the allow-list leaves out.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "metrics-b", UID: "uid-metrics-web"}}
	recorder.Event(other, corev1.EventTypeNormal, "Pulled", "Container image already present")
	waitCounted(ctx, t, "an Event in metrics-b", 1, counted("Normal", "Pulled", "Pod", "_other"))

	// Writes that add no occurrence: a dry run, a refused create, a patch
	// of a label.
	dry := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "dry", Namespace: "metrics-a"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "metrics-a", Name: "crashing"},
		Reason:         "BackOff", Type: corev1.EventTypeWarning, Count: 5,
	}
	if _, err := client.CoreV1().Events("metrics-a").Create(ctx, dry, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	invalid := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "invalid", Namespace: "metrics-a"},
		Regarding:  corev1.ObjectReference{Kind: "Pod", Namespace: "metrics-a", Name: "crashing"},
		Reason:     "BackOff", Type: corev1.EventTypeWarning,
	}
	if _, err := client.EventsV1().Events("metrics-a").Create(ctx, invalid, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("create without eventTime and reportingController: %v, want 422", err)
	}
	list, err := client.CoreV1().Events("metrics-a").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=uid-metrics-crashing"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the BackOff Event: %v %v", list, err)
	}
	if _, err := client.CoreV1().Events("metrics-a").Patch(ctx, list.Items[0].Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"seen":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := counted("Warning", "BackOff", "Pod", "metrics-a")(); got != 3 {
		t.Errorf("after a dry run, a refused create and a label patch: BackOff counted %v, want still 3", got)
	}

	// A storm of invented reasons, two occurrences each.
	const storm = 30
	for i := 0; i < storm; i++ {
		e := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("storm-%d", i), Namespace: "metrics-a"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "metrics-a", Name: "storm"},
			Reason:         fmt.Sprintf("Invented%d", i), Type: corev1.EventTypeWarning, Count: 2,
			Source: corev1.EventSource{Component: "storm"},
		}
		if _, err := client.CoreV1().Events("metrics-a").Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	recorder.Event(crashing, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	waitCounted(ctx, t, "tools/record after the storm", 4, counted("Warning", "BackOff", "Pod", "metrics-a"))

	series := strings.Count(framework.MetricLines(t, config, "event_apiserver_events_total", ""), "\n") + 1
	if series > maxSeries {
		t.Errorf("%d series of event_apiserver_events_total, over --event-metrics-max-series=%d:\n%s", series, maxSeries,
			framework.MetricLines(t, config, "event_apiserver_events_total", ""))
	}
	if held := framework.MetricValue(t, config, "event_apiserver_events_series", nil); held != float64(series) {
		t.Errorf("event_apiserver_events_series = %v, want the %d series shown", held, series)
	}
	// Room was kept for three fold series: 3 series before the storm
	// leave 10-3-3 = 4 for invented reasons.
	folded := framework.MetricValue(t, config, "event_apiserver_events_folded_total", map[string]string{"source": "written"})
	if want := float64(2 * (storm - (maxSeries - 3 - 3))); folded != want {
		t.Errorf("event_apiserver_events_folded_total = %v, want %v", folded, want)
	}
	if got := counted("Warning", "_other", "_other", "_other")(); got != folded {
		t.Errorf("the Warning fold series counted %v, want the %v folded", got, folded)
	}
	if warnings := framework.MetricValue(t, config, "event_apiserver_events_total", map[string]string{"type": "Warning"}); warnings != 4+2+2*storm {
		t.Errorf("Warnings counted %v, want every occurrence, %d", warnings, 4+2+2*storm)
	}
}

// TestEventMetricsCaptured: a history-only replica counts the Events it
// reads from kube-apiserver's watch, written by client-go's recorders,
// as occurrences; the Events kube-apiserver held before it started (read
// by its first relist) are not counted.
func TestEventMetricsCaptured(t *testing.T) {
	t.Parallel()
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	client := kube.Client(t)
	ctx := testCtx(t)
	const ns = "metrics-captured"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "before", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "old"},
		Reason:         "BackOff", Type: corev1.EventTypeWarning, Count: 7,
	}
	if _, err := client.CoreV1().Events(ns).Create(ctx, before, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replica := framework.StartHistoryOnlyReplica(t, kube, nil)
	counted := func(reason string) func() float64 {
		return func() float64 {
			return replica.Metric(t, fmt.Sprintf(`event_apiserver_events_total{reason=%q,regarding_kind="Pod",regarding_namespace=%q,source="kubernetes",type="Warning"}`, reason, ns))
		}
	}

	recordEvents(ctx, t, client, ns)
	waitCounted(ctx, t, "tools/record's three occurrences", 3, counted("BackOff"))
	waitCounted(ctx, t, "tools/events' two occurrences", 2, counted("FailedScheduling"))
}

// recordEvents writes, through kube-apiserver, three occurrences of a
// BackOff with tools/record and two of a FailedScheduling with tools/events,
// each about a pod in ns, and waits until kube-apiserver holds them.
func recordEvents(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	crashing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crashing", Namespace: ns, UID: "uid-captured-crashing"}}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})

	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: ns, UID: "uid-captured-pending"}}
	eventsBroadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	defer eventsBroadcaster.Shutdown()
	if err := eventsBroadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	scheduler := eventsBroadcaster.NewRecorder(scheme.Scheme, "example.com/scheduler")

	stored := func(what, uid string, done func(corev1.Event) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(ctx context.Context) (bool, error) {
			list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + uid})
			if err != nil {
				return false, err
			}
			return len(list.Items) == 1 && done(list.Items[0]), nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	for i := int32(1); i <= 3; i++ {
		recorder.Event(crashing, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
		stored(fmt.Sprintf("BackOff count %d", i), "uid-captured-crashing", func(e corev1.Event) bool { return e.Count == i })
	}
	scheduler.Eventf(pending, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "0/%d nodes are available", 3)
	stored("FailedScheduling", "uid-captured-pending", func(corev1.Event) bool { return true })
	scheduler.Eventf(pending, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "0/%d nodes are available", 3)
	stored("FailedScheduling series 2", "uid-captured-pending", func(e corev1.Event) bool { return e.Series != nil && e.Series.Count == 2 })
}
