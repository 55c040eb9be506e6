package event

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// requestContext is a request through gv; the zero GroupVersion is an
// internal caller, with no request info.
func requestContext(gv schema.GroupVersion) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), "default")
	if gv.Empty() {
		return ctx
	}
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, APIGroup: gv.Group, APIVersion: gv.Version, Namespace: "default", Resource: "events",
	})
}

// legacyEvent is what client-go's tools/record writes through core/v1.
func legacyEvent() *core.Event {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return &core.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "pod.1", Namespace: "default"},
		InvolvedObject: core.ObjectReference{Kind: "Pod", Namespace: "default", Name: "pod"},
		Reason:         "Started",
		Message:        "Started container",
		Source:         core.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

// newEvent is what client-go's tools/events writes through events.k8s.io/v1.
func newEvent() *core.Event {
	return &core.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "pod.2", Namespace: "default"},
		InvolvedObject:      core.ObjectReference{Kind: "Pod", Namespace: "default", Name: "pod"},
		Reason:              "Scheduled",
		Message:             "Successfully assigned default/pod to node-1",
		EventTime:           metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		ReportingController: "default-scheduler",
		ReportingInstance:   "default-scheduler-node-1",
		Action:              "Binding",
		Type:                corev1.EventTypeNormal,
	}
}

// errorFields lists the paths of errs, in order.
func errorFields(errs field.ErrorList) []string {
	var fields []string
	for _, err := range errs {
		fields = append(fields, err.Field)
	}
	return fields
}

// TestStrategyValidate: the rules depend on the API version the request came
// through, as in kube-apiserver's event strategy: core/v1 stays lenient for
// old recorders, events.k8s.io/v1 (and an internal caller) is strict.
func TestStrategyValidate(t *testing.T) {
	strategy := NewStrategy(runtime.NewScheme())
	for _, tc := range []struct {
		name       string
		version    schema.GroupVersion
		event      *core.Event
		wantFields []string
	}{
		{name: "core/v1 legacy event", version: corev1.SchemeGroupVersion, event: legacyEvent()},
		{name: "core/v1 new event", version: corev1.SchemeGroupVersion, event: newEvent()},
		{
			name:    "core/v1 namespace mismatch",
			version: corev1.SchemeGroupVersion,
			event: func() *core.Event {
				e := legacyEvent()
				e.InvolvedObject.Namespace = "other"
				return e
			}(),
			wantFields: []string{"involvedObject.namespace"},
		},
		{
			name:    "core/v1 new event without reporting controller names core/v1's field",
			version: corev1.SchemeGroupVersion,
			event: func() *core.Event {
				e := newEvent()
				e.ReportingController = ""
				return e
			}(),
			// Required, then the qualified-name checks of "", as kube-apiserver reports it.
			wantFields: []string{"reportingComponent", "reportingComponent", "reportingComponent"},
		},
		{name: "events.k8s.io/v1 new event", version: eventsv1.SchemeGroupVersion, event: newEvent()},
		{
			name:       "events.k8s.io/v1 legacy event",
			version:    eventsv1.SchemeGroupVersion,
			event:      legacyEvent(),
			wantFields: []string{"eventTime", "firstTimestamp", "lastTimestamp", "count", "source"},
		},
		{
			name:    "events.k8s.io/v1 without reporting controller",
			version: eventsv1.SchemeGroupVersion,
			event: func() *core.Event {
				e := newEvent()
				e.ReportingController = ""
				return e
			}(),
			wantFields: []string{"reportingController", "reportingController", "reportingController"},
		},
		{
			name:       "internal caller is strict",
			event:      legacyEvent(),
			wantFields: []string{"eventTime", "firstTimestamp", "lastTimestamp", "count", "source"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := strategy.Validate(requestContext(tc.version), tc.event)
			if got := errorFields(errs); !reflect.DeepEqual(got, tc.wantFields) {
				t.Errorf("invalid fields %q, want %q (%v)", got, tc.wantFields, errs)
			}
		})
	}
}

// TestStrategyValidateUpdate: through core/v1 any field may change; through
// events.k8s.io/v1 only the series and metadata.
func TestStrategyValidateUpdate(t *testing.T) {
	strategy := NewStrategy(runtime.NewScheme())
	for _, tc := range []struct {
		name       string
		version    schema.GroupVersion
		old        *core.Event
		update     func(*core.Event)
		wantFields []string
	}{
		{
			name:    "core/v1 repeat bumps count and lastTimestamp",
			version: corev1.SchemeGroupVersion,
			old:     legacyEvent(),
			update: func(e *core.Event) {
				e.Count = 2
				e.LastTimestamp = metav1.NewTime(e.LastTimestamp.Add(time.Minute))
			},
		},
		{
			name:    "core/v1 may change the reason",
			version: corev1.SchemeGroupVersion,
			old:     legacyEvent(),
			update:  func(e *core.Event) { e.Reason = "Other" },
		},
		{
			name:    "events.k8s.io/v1 series heartbeat",
			version: eventsv1.SchemeGroupVersion,
			old:     newEvent(),
			update: func(e *core.Event) {
				e.Series = &core.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(e.EventTime.Add(time.Minute))}
			},
		},
		{
			name:    "events.k8s.io/v1 may not change the reason",
			version: eventsv1.SchemeGroupVersion,
			old:     newEvent(),
			update:  func(e *core.Event) { e.Reason = "Other" },
			// Twice, as kube-apiserver reports it.
			wantFields: []string{"reason", "reason"},
		},
		{
			name:       "events.k8s.io/v1 series of one",
			version:    eventsv1.SchemeGroupVersion,
			old:        newEvent(),
			update:     func(e *core.Event) { e.Series = &core.EventSeries{Count: 1, LastObservedTime: e.EventTime} },
			wantFields: []string{"series.count"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.old.ResourceVersion = "1"
			updated := tc.old.DeepCopy()
			tc.update(updated)
			errs := strategy.ValidateUpdate(requestContext(tc.version), updated, tc.old)
			if got := errorFields(errs); !reflect.DeepEqual(got, tc.wantFields) {
				t.Errorf("invalid fields %q, want %q (%v)", got, tc.wantFields, errs)
			}
		})
	}
}

// TestStrategyPrepare: as kube-apiserver's event strategy, create and update
// leave the Event as the client sent it (no status to drop, no generation).
func TestStrategyPrepare(t *testing.T) {
	strategy := NewStrategy(runtime.NewScheme())
	ctx := requestContext(corev1.SchemeGroupVersion)

	created := legacyEvent()
	strategy.PrepareForCreate(ctx, created)
	if want := legacyEvent(); !reflect.DeepEqual(created, want) {
		t.Errorf("PrepareForCreate changed the Event:\n%#v\nwant\n%#v", created, want)
	}

	old, updated := newEvent(), newEvent()
	updated.Series = &core.EventSeries{Count: 2, LastObservedTime: updated.EventTime}
	want := updated.DeepCopy()
	strategy.PrepareForUpdate(ctx, updated, old)
	if !reflect.DeepEqual(updated, want) {
		t.Errorf("PrepareForUpdate changed the Event:\n%#v\nwant\n%#v", updated, want)
	}
}

// TestStrategyFlags pins the answers kube-apiserver's event strategy gives.
func TestStrategyFlags(t *testing.T) {
	strategy := NewStrategy(runtime.NewScheme())
	ctx := requestContext(corev1.SchemeGroupVersion)
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{name: "NamespaceScoped", got: strategy.NamespaceScoped(), want: true},
		{name: "AllowCreateOnUpdate", got: strategy.AllowCreateOnUpdate(), want: true},
		{name: "AllowUnconditionalUpdate", got: strategy.AllowUnconditionalUpdate(), want: true},
		{name: "DefaultGarbageCollectionPolicy", got: strategy.DefaultGarbageCollectionPolicy(ctx), want: rest.Unsupported},
		{name: "WarningsOnCreate", got: len(strategy.WarningsOnCreate(ctx, legacyEvent())), want: 0},
		{name: "WarningsOnUpdate", got: len(strategy.WarningsOnUpdate(ctx, legacyEvent(), legacyEvent())), want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("%v, want %v", tc.got, tc.want)
			}
		})
	}
}
