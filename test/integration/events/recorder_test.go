package events

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestRecorders runs client-go's two event recorders against the server,
// unchanged, and checks what repeated events leave in storage.
func TestRecorders(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	client := server.Client(t)

	t.Run("tools/record core/v1", func(t *testing.T) { testRecordRecorder(t, client) })
	t.Run("tools/events events.k8s.io/v1", func(t *testing.T) { testEventsRecorder(t, client) })
}

// sinkCalls records what a recorder sent and what the server answered.
type sinkCalls struct {
	mu    sync.Mutex
	calls []string
	errs  []error
}

func (s *sinkCalls) add(call string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %w", call, err))
	}
}

// waitCalls waits until at least n calls have returned: the server may show
// a write before the recorder's call has returned to it.
func (s *sinkCalls) waitCalls(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
		calls, _ := s.snapshot()
		return len(calls) >= n, nil
	})
	if err != nil {
		calls, errs := s.snapshot()
		t.Fatalf("waiting for %d recorder calls: %v (calls %v, errors %v)", n, err, calls, errs)
	}
}

func (s *sinkCalls) snapshot() ([]string, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...), append([]error(nil), s.errs...)
}

// recordSink is the typed core/v1 EventSinkImpl with every call recorded.
type recordSink struct {
	sink *typedcorev1.EventSinkImpl
	sinkCalls
}

func (s *recordSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.sink.Create(e)
	s.add("create", err)
	return out, err
}

func (s *recordSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.sink.Update(e)
	s.add("update", err)
	return out, err
}

func (s *recordSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.sink.Patch(e, data)
	s.add("patch", err)
	return out, err
}

func testRecordRecorder(t *testing.T, client kubernetes.Interface) {
	const ns = "record"
	ctx := framework.PollCtx(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crashing", Namespace: ns, UID: "uid-crashing"}}

	sink := &recordSink{sink: &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(sink)
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})

	// stored waits until the one Event about the pod has count n.
	stored := func(n int32) *corev1.Event {
		t.Helper()
		var got *corev1.Event
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(ctx context.Context) (bool, error) {
			list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=uid-crashing"})
			if err != nil {
				return false, err
			}
			if len(list.Items) > 1 {
				return false, fmt.Errorf("%d Events for one repeated event, want 1: %+v", len(list.Items), list.Items)
			}
			if len(list.Items) == 1 && list.Items[0].Count == n {
				got = &list.Items[0]
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			calls, errs := sink.snapshot()
			t.Fatalf("waiting for count %d: %v (recorder calls %v, errors %v)", n, err, calls, errs)
		}
		return got
	}

	recorder.Event(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	first := stored(1)
	recorder.Event(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	stored(2)
	// lastTimestamp has a resolution of one second: let the clock pass the
	// first one's second so that the third occurrence must advance it.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(first.LastTimestamp.Time), nil
	}); err != nil {
		t.Fatal(err)
	}
	recorder.Event(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	last := stored(3)

	sink.waitCalls(ctx, t, 3)
	calls, errs := sink.snapshot()
	if want := []string{"create", "patch", "patch"}; fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("recorder calls = %v, want %v (a create, then strategic-merge PATCHes raising count)", calls, want)
	}
	if len(errs) > 0 {
		t.Errorf("server rejected recorder calls: %v", errs)
	}
	if last.UID != first.UID || last.Name != first.Name {
		t.Errorf("repeats replaced the Event: %s/%s became %s/%s", first.Name, first.UID, last.Name, last.UID)
	}
	if !last.FirstTimestamp.Equal(&first.FirstTimestamp) {
		t.Errorf("firstTimestamp changed from %v to %v", first.FirstTimestamp, last.FirstTimestamp)
	}
	if !last.LastTimestamp.After(first.LastTimestamp.Time) {
		t.Errorf("lastTimestamp %v did not advance past %v", last.LastTimestamp, first.LastTimestamp)
	}
	wantFields := map[string][2]string{
		"involvedObject.kind": {last.InvolvedObject.Kind, "Pod"},
		"involvedObject.name": {last.InvolvedObject.Name, "crashing"},
		"reason":              {last.Reason, "BackOff"},
		"message":             {last.Message, "Back-off restarting failed container"},
		"source.component":    {last.Source.Component, "kubelet"},
		"source.host":         {last.Source.Host, "node-1"},
		"reportingComponent":  {last.ReportingController, "kubelet"},
		"reportingInstance":   {last.ReportingInstance, "node-1"},
		"type":                {last.Type, corev1.EventTypeWarning},
	}
	for field, v := range wantFields {
		if v[0] != v[1] {
			t.Errorf("%s = %q, want %q", field, v[0], v[1])
		}
	}

	// The same Event through events.k8s.io/v1.
	ev, err := client.EventsV1().Events(ns).Get(ctx, last.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertSameEventsV1Event(t, "recorded Event through events.k8s.io/v1", framework.EventsV1FromCore(last), ev)
}

// eventsSink is tools/events' EventSinkImpl with every call recorded.
type eventsSink struct {
	sink *events.EventSinkImpl
	sinkCalls
}

func (s *eventsSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.sink.Create(ctx, e)
	s.add("create", err)
	return out, err
}

func (s *eventsSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.sink.Update(ctx, e)
	s.add("update", err)
	return out, err
}

func (s *eventsSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.sink.Patch(ctx, e, data)
	s.add("patch", err)
	return out, err
}

func testEventsRecorder(t *testing.T, client kubernetes.Interface) {
	const ns = "events"
	ctx := framework.PollCtx(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: ns, UID: types.UID("uid-pending")}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: types.UID("uid-node-1")}}

	sink := &eventsSink{sink: &events.EventSinkImpl{Interface: client.EventsV1()}}
	broadcaster := events.NewBroadcaster(sink)
	defer broadcaster.Shutdown()
	recordCtx, stopRecording := context.WithCancel(ctx)
	defer stopRecording()
	if err := broadcaster.StartRecordingToSinkWithContext(recordCtx); err != nil {
		t.Fatal(err)
	}
	recorder := broadcaster.NewRecorder(scheme.Scheme, "example.com/scheduler")
	emit := func() {
		recorder.Eventf(pod, node, corev1.EventTypeWarning, "FailedScheduling", "Scheduling",
			"%d nodes are available", 0)
	}

	// stored waits until the one Event about the pod satisfies done.
	stored := func(what string, done func(*eventsv1.Event) bool) *eventsv1.Event {
		t.Helper()
		var got *eventsv1.Event
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(ctx context.Context) (bool, error) {
			list, err := client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.uid=uid-pending"})
			if err != nil {
				return false, err
			}
			if len(list.Items) > 1 {
				return false, fmt.Errorf("%d Events for one repeated event, want 1: %+v", len(list.Items), list.Items)
			}
			if len(list.Items) == 1 && done(&list.Items[0]) {
				got = &list.Items[0]
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			calls, errs := sink.snapshot()
			t.Fatalf("waiting for %s: %v (recorder calls %v, errors %v)", what, err, calls, errs)
		}
		return got
	}
	seriesCount := func(n int32) func(*eventsv1.Event) bool {
		return func(e *eventsv1.Event) bool { return e.Series != nil && e.Series.Count == n }
	}

	emit()
	first := stored("the first occurrence", func(*eventsv1.Event) bool { return true })
	if first.Series != nil {
		t.Errorf("first occurrence has series %+v, want none", first.Series)
	}
	emit()
	second := stored("series.count 2", seriesCount(2))
	if second.Series.LastObservedTime.Before(&first.EventTime) {
		t.Errorf("series.lastObservedTime %v is before eventTime %v", second.Series.LastObservedTime, first.EventTime)
	}

	// From the third occurrence on, tools/events only counts in its cache
	// and writes the series on its 30-minute heartbeat
	// (refreshExistingEventSeries). StartRecordingToSinkWithContext runs
	// that heartbeat at once (wait.UntilWithContext calls it before the first
	// period), so starting it again flushes the cached count now. The
	// occurrence is counted in a goroutine: start again until it lands.
	emit()
	var heartbeats []context.CancelFunc
	defer func() {
		for _, cancel := range heartbeats {
			cancel()
		}
	}()
	third := stored("series.count 3", func(e *eventsv1.Event) bool {
		if e.Series != nil && e.Series.Count == 3 {
			return true
		}
		hbCtx, cancel := context.WithCancel(ctx)
		heartbeats = append(heartbeats, cancel)
		if err := broadcaster.StartRecordingToSinkWithContext(hbCtx); err != nil {
			t.Error(err)
		}
		return false
	})

	sink.waitCalls(ctx, t, 3)
	calls, errs := sink.snapshot()
	if len(calls) < 3 || calls[0] != "create" || calls[1] != "patch" {
		t.Errorf("recorder calls = %v, want a create, then series PATCHes", calls)
	}
	for _, c := range calls[1:] {
		if c != "patch" {
			t.Errorf("recorder calls = %v, want only PATCHes after the create", calls)
			break
		}
	}
	if len(errs) > 0 {
		t.Errorf("server rejected recorder calls: %v", errs)
	}
	if third.UID != first.UID {
		t.Errorf("repeats replaced the Event: uid %s became %s", first.UID, third.UID)
	}
	if !third.EventTime.Equal(&first.EventTime) {
		t.Errorf("eventTime changed from %v to %v", first.EventTime, third.EventTime)
	}
	if !third.Series.LastObservedTime.After(second.Series.LastObservedTime.Time) {
		t.Errorf("series.lastObservedTime %v did not advance past %v", third.Series.LastObservedTime, second.Series.LastObservedTime)
	}
	hostnameSuffix := third.ReportingInstance[len("example.com/scheduler-"):]
	wantFields := map[string][2]string{
		"regarding.kind":      {third.Regarding.Kind, "Pod"},
		"regarding.name":      {third.Regarding.Name, "pending"},
		"related.kind":        {third.Related.Kind, "Node"},
		"related.name":        {third.Related.Name, "node-1"},
		"reason":              {third.Reason, "FailedScheduling"},
		"action":              {third.Action, "Scheduling"},
		"note":                {third.Note, "0 nodes are available"},
		"type":                {third.Type, corev1.EventTypeWarning},
		"reportingController": {third.ReportingController, "example.com/scheduler"},
		"reportingInstance":   {third.ReportingInstance, "example.com/scheduler-" + hostnameSuffix},
	}
	for field, v := range wantFields {
		if v[0] != v[1] {
			t.Errorf("%s = %q, want %q", field, v[0], v[1])
		}
	}
	if hostnameSuffix == "" {
		t.Errorf("reportingInstance %q lacks the hostname", third.ReportingInstance)
	}

	// The same Event through core/v1.
	core, err := client.CoreV1().Events(ns).Get(ctx, third.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertSameCoreEvent(t, "recorded Event through core/v1", framework.CoreFromEventsV1(third), core)
}
