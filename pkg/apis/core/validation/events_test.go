package validation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// The messages below are spelled out rather than taken from apimachinery so
// that a change in what a client would read fails here.
const (
	dnsSubdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', " +
		"and must start and end with an alphanumeric character " +
		"(e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	namePartEmptyMsg  = "name part must be non-empty"
	namePartFormatMsg = "name part must consist of alphanumeric characters, '-', '_' or '.', " +
		"and must start and end with an alphanumeric character " +
		"(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	qualifiedNameOrigin = "format=qualified-name"
)

var (
	coreV1        = corev1.SchemeGroupVersion
	eventsV1beta1 = eventsv1beta1.SchemeGroupVersion
	eventsV1      = eventsv1.SchemeGroupVersion
	// noVersion is what the strategy passes when the context carries no
	// request info; kube-apiserver validates it strictly.
	noVersion = schema.GroupVersion{}

	eventTime = metav1.NewMicroTime(time.Date(2017, 9, 19, 13, 49, 16, 0, time.UTC))
	someTime  = metav1.NewTime(time.Date(2017, 9, 19, 13, 49, 16, 0, time.UTC))
)

// newStyleEvent is an Event as tools/events writes it through
// events.k8s.io/v1: valid for every request version.
func newStyleEvent(mutate ...func(*core.Event)) *core.Event {
	e := &core.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: metav1.NamespaceSystem, ResourceVersion: "1"},
		InvolvedObject: core.ObjectReference{
			APIVersion: "v1",
			Kind:       "Node",
			Name:       "node-a",
		},
		EventTime:           eventTime,
		ReportingController: "k8s.io/my-controller",
		ReportingInstance:   "node-xyz",
		Action:              "Do",
		Reason:              "Because",
		Type:                corev1.EventTypeNormal,
	}
	for _, m := range mutate {
		m(e)
	}
	return e
}

// oldStyleEvent is an Event as tools/record writes it through core/v1: no
// eventTime, deprecated fields set. Valid for core/v1 and v1beta1 only.
func oldStyleEvent(mutate ...func(*core.Event)) *core.Event {
	e := &core.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-a.17f0c0ffee", Namespace: "foo", ResourceVersion: "1"},
		InvolvedObject: core.ObjectReference{
			APIVersion: "v1",
			Kind:       "Pod",
			Namespace:  "foo",
			Name:       "pod-a",
		},
		Reason:         "Started",
		Message:        "Started container app",
		Source:         core.EventSource{Component: "kubelet", Host: "node-a"},
		FirstTimestamp: someTime,
		LastTimestamp:  someTime,
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
	for _, m := range mutate {
		m(e)
	}
	return e
}

func invalid(path string, value any, detail string) *field.Error {
	return field.Invalid(field.NewPath(path), value, detail)
}

func required(path, detail string) *field.Error {
	return field.Required(field.NewPath(path), detail)
}

func immutable(path string, value any) *field.Error {
	return field.Invalid(field.NewPath(path), value, "field is immutable")
}

func badController(path, value string, msgs ...string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(field.NewPath(path), value, msg).WithOrigin(qualifiedNameOrigin))
	}
	return errs
}

func errs(items ...any) field.ErrorList {
	var list field.ErrorList
	for _, item := range items {
		switch v := item.(type) {
		case *field.Error:
			list = append(list, v)
		case field.ErrorList:
			list = append(list, v...)
		default:
			panic(fmt.Sprintf("unexpected %T", item))
		}
	}
	return list
}

func TestValidateEventCreate(t *testing.T) {
	tests := []struct {
		name    string
		version schema.GroupVersion
		event   *core.Event
		want    field.ErrorList
	}{
		// Legacy rules for old events (no eventTime), every version.
		{
			name:    "core/v1 old event from tools/record is valid",
			version: coreV1,
			event:   oldStyleEvent(),
		},
		{
			name:    "core/v1 old event about a cluster-scoped object in default",
			version: coreV1,
			event: oldStyleEvent(func(e *core.Event) {
				e.Namespace = metav1.NamespaceDefault
				e.InvolvedObject = core.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-a"}
			}),
		},
		{
			name:    "core/v1 old event about a cluster-scoped object outside default",
			version: coreV1,
			event: oldStyleEvent(func(e *core.Event) {
				e.InvolvedObject = core.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-a"}
			}),
			want: errs(invalid("involvedObject.namespace", "", "does not match event.namespace")),
		},
		{
			name:    "core/v1 old event whose involvedObject namespace differs",
			version: coreV1,
			event:   oldStyleEvent(func(e *core.Event) { e.InvolvedObject.Namespace = "bar" }),
			want:    errs(invalid("involvedObject.namespace", "bar", "does not match event.namespace")),
		},
		{
			name:    "core/v1 old event in the empty namespace fails the subdomain check at path namespace",
			version: coreV1,
			event: oldStyleEvent(func(e *core.Event) {
				e.Namespace = ""
				e.InvolvedObject.Namespace = ""
			}),
			want: errs(invalid("namespace", "", dnsSubdomainMsg)),
		},
		{
			name:    "core/v1 old event with an empty namespace and a namespaced object",
			version: coreV1,
			event:   oldStyleEvent(func(e *core.Event) { e.Namespace = "" }),
			want: errs(
				invalid("involvedObject.namespace", "foo", "does not match event.namespace"),
				invalid("namespace", "", dnsSubdomainMsg),
			),
		},
		{
			name:    "core/v1 old event in a namespace that is not a DNS subdomain",
			version: coreV1,
			event: oldStyleEvent(func(e *core.Event) {
				e.Namespace = "aoeu-_-aoeu"
				e.InvolvedObject.Namespace = "aoeu-_-aoeu"
			}),
			want: errs(invalid("namespace", "aoeu-_-aoeu", dnsSubdomainMsg)),
		},
		{
			name:    "core/v1 old event in a namespace longer than 253",
			version: coreV1,
			event: oldStyleEvent(func(e *core.Event) {
				e.Namespace = strings.Repeat("a", 254)
				e.InvolvedObject.Namespace = e.Namespace
			}),
			want: errs(invalid("namespace", strings.Repeat("a", 254), "must be no more than 253 characters")),
		},
		{
			name:    "core/v1 old event has no limits on reason, message, action or instance and needs none of them",
			version: coreV1,
			event: oldStyleEvent(func(e *core.Event) {
				e.Reason = strings.Repeat("r", ReasonLengthLimit+1)
				e.Message = strings.Repeat("m", NoteLengthLimit+1)
				e.Action = strings.Repeat("a", ActionLengthLimit+1)
				e.ReportingInstance = strings.Repeat("i", ReportingInstanceLengthLimit+1)
				e.ReportingController = "not a qualified name"
			}),
		},
		{
			name:    "core/v1 old event with an upper-case name and a bad type is not checked further",
			version: coreV1,
			event: oldStyleEvent(func(e *core.Event) {
				e.Name = "Pod:A"
				e.Type = "Info"
				e.Finalizers = []string{"custom"}
			}),
		},
		{
			name:    "events.k8s.io/v1beta1 old event whose involvedObject namespace differs",
			version: eventsV1beta1,
			event:   oldStyleEvent(func(e *core.Event) { e.InvolvedObject.Namespace = "bar" }),
			want:    errs(invalid("involvedObject.namespace", "bar", "does not match event.namespace")),
		},

		// Legacy rules for new events (eventTime set), every version.
		{
			name:    "core/v1 new event is valid",
			version: coreV1,
			event:   newStyleEvent(),
		},
		{
			name:    "core/v1 new event missing every reporting field names reportingComponent",
			version: coreV1,
			event: newStyleEvent(func(e *core.Event) {
				e.ReportingController = ""
				e.ReportingInstance = ""
				e.Action = ""
				e.Reason = ""
			}),
			want: errs(
				required("reportingComponent", ""),
				badController("reportingComponent", "", namePartEmptyMsg, namePartFormatMsg),
				required("reportingInstance", ""),
				required("action", ""),
				required("reason", ""),
			),
		},
		{
			name:    "core/v1 new event with an unqualified reportingComponent",
			version: coreV1,
			event:   newStyleEvent(func(e *core.Event) { e.ReportingController = "my-contr@ller" }),
			want:    badController("reportingComponent", "my-contr@ller", namePartFormatMsg),
		},
		{
			name:    "core/v1 new event with an empty prefix in reportingComponent",
			version: coreV1,
			event:   newStyleEvent(func(e *core.Event) { e.ReportingController = "/my-controller" }),
			want:    badController("reportingComponent", "/my-controller", "prefix part must be non-empty"),
		},
		{
			name:    "core/v1 new event about a cluster-scoped object outside default and kube-system",
			version: coreV1,
			event:   newStyleEvent(func(e *core.Event) { e.Namespace = "foo" }),
			want:    errs(invalid("involvedObject.namespace", "", "does not match event.namespace")),
		},
		{
			name:    "core/v1 new event about a cluster-scoped object in default",
			version: coreV1,
			event:   newStyleEvent(func(e *core.Event) { e.Namespace = metav1.NamespaceDefault }),
		},
		{
			name:    "core/v1 new event whose involvedObject namespace differs is not rejected",
			version: coreV1,
			event: newStyleEvent(func(e *core.Event) {
				e.Namespace = "foo"
				e.InvolvedObject.Namespace = "bar"
			}),
		},
		{
			name:    "core/v1 new event with reportingInstance at the limit",
			version: coreV1,
			event: newStyleEvent(func(e *core.Event) {
				e.ReportingInstance = strings.Repeat("i", ReportingInstanceLengthLimit)
				e.Action = strings.Repeat("a", ActionLengthLimit)
				e.Reason = strings.Repeat("r", ReasonLengthLimit)
				e.Message = strings.Repeat("m", NoteLengthLimit)
			}),
		},
		{
			name:    "core/v1 new event with reportingInstance over the limit",
			version: coreV1,
			event: newStyleEvent(func(e *core.Event) {
				e.ReportingInstance = strings.Repeat("i", ReportingInstanceLengthLimit+1)
			}),
			want: errs(invalid("reportingInstance", "", "can have at most 128 characters")),
		},
		{
			name:    "core/v1 new event with action over the limit",
			version: coreV1,
			event:   newStyleEvent(func(e *core.Event) { e.Action = strings.Repeat("a", ActionLengthLimit+1) }),
			want:    errs(invalid("action", "", "can have at most 128 characters")),
		},
		{
			name:    "core/v1 new event with reason over the limit",
			version: coreV1,
			event:   newStyleEvent(func(e *core.Event) { e.Reason = strings.Repeat("r", ReasonLengthLimit+1) }),
			want:    errs(invalid("reason", "", "can have at most 128 characters")),
		},
		{
			name:    "core/v1 new event with message over the limit",
			version: coreV1,
			event:   newStyleEvent(func(e *core.Event) { e.Message = strings.Repeat("m", NoteLengthLimit+1) }),
			want:    errs(invalid("message", "", "can have at most 1024 characters")),
		},
		{
			name:    "core/v1 new event limits count bytes not characters",
			version: coreV1,
			// 513 two-byte runes: under the limit in characters, over it in bytes.
			event: newStyleEvent(func(e *core.Event) { e.Message = strings.Repeat("é", 513) }),
			want:  errs(invalid("message", "", "can have at most 1024 characters")),
		},
		{
			name:    "core/v1 new event in the empty namespace",
			version: coreV1,
			event:   newStyleEvent(func(e *core.Event) { e.Namespace = "" }),
			want: errs(
				invalid("involvedObject.namespace", "", "does not match event.namespace"),
				invalid("namespace", "", dnsSubdomainMsg),
			),
		},
		{
			name:    "events.k8s.io/v1beta1 new event missing reportingController",
			version: eventsV1beta1,
			event:   newStyleEvent(func(e *core.Event) { e.ReportingController = "" }),
			want: errs(
				required("reportingController", ""),
				badController("reportingController", "", namePartEmptyMsg, namePartFormatMsg),
			),
		},
		{
			name:    "events.k8s.io/v1beta1 new event skips the strict checks",
			version: eventsV1beta1,
			event: newStyleEvent(func(e *core.Event) {
				e.Name = "Not_A_Subdomain"
				e.Type = ""
				e.Series = &core.EventSeries{Count: 1}
				e.FirstTimestamp = someTime
				e.Count = 3
				e.Source.Host = "node-a"
			}),
		},

		// Strict rules: events.k8s.io/v1 and no version.
		{
			name:    "events.k8s.io/v1 new event is valid",
			version: eventsV1,
			event:   newStyleEvent(),
		},
		{
			name:    "events.k8s.io/v1 valid event with a series and standard or qualified finalizers",
			version: eventsV1,
			event: newStyleEvent(func(e *core.Event) {
				e.Type = corev1.EventTypeWarning
				e.Series = &core.EventSeries{Count: 2, LastObservedTime: eventTime}
				e.Finalizers = []string{"kubernetes", metav1.FinalizerOrphanDependents, "example.com/keep"}
			}),
		},
		{
			name:    "events.k8s.io/v1 missing reportingController",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.ReportingController = "" }),
			want: errs(
				required("reportingController", ""),
				badController("reportingController", "", namePartEmptyMsg, namePartFormatMsg),
			),
		},
		{
			name:    "events.k8s.io/v1 missing name",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Name = "" }),
			want:    errs(required("metadata.name", "name or generateName is required")),
		},
		{
			name:    "events.k8s.io/v1 name must be a DNS subdomain",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Name = "Pod:A" }),
			want:    errs(invalid("metadata.name", "Pod:A", dnsSubdomainMsg)),
		},
		{
			name:    "events.k8s.io/v1 generateName must be a DNS subdomain prefix",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.GenerateName = "Bad_" }),
			want:    errs(invalid("metadata.generateName", "Bad_", dnsSubdomainMsg)),
		},
		{
			name:    "events.k8s.io/v1 missing namespace",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Namespace = "" }),
			want: errs(
				invalid("involvedObject.namespace", "", "does not match event.namespace"),
				invalid("namespace", "", dnsSubdomainMsg),
				required("metadata.namespace", ""),
			),
		},
		{
			name:    "events.k8s.io/v1 unprefixed non-standard finalizer",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Finalizers = []string{"custom"} }),
			want: errs(invalid("metadata.finalizers[0]", "custom",
				"name is neither a standard finalizer name nor is it fully qualified")),
		},
		{
			name:    "events.k8s.io/v1 missing eventTime also gets the old-event namespace rules",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.EventTime = metav1.MicroTime{} }),
			want: errs(
				invalid("involvedObject.namespace", "", "does not match event.namespace"),
				required("eventTime", ""),
			),
		},
		{
			name:    "events.k8s.io/v1 eventTime at the zero instant in another location counts as set",
			version: eventsV1,
			event: newStyleEvent(func(e *core.Event) {
				e.EventTime = metav1.NewMicroTime(time.Time{}.In(time.FixedZone("X", 0)))
			}),
		},
		{
			name:    "events.k8s.io/v1 empty type",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Type = "" }),
			want:    errs(invalid("type", "", "has invalid value: ")),
		},
		{
			name:    "events.k8s.io/v1 unknown type",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Type = "Info" }),
			want:    errs(invalid("type", "", "has invalid value: Info")),
		},
		{
			name:    "events.k8s.io/v1 series count below 2",
			version: eventsV1,
			event: newStyleEvent(func(e *core.Event) {
				e.Series = &core.EventSeries{Count: 1, LastObservedTime: eventTime}
			}),
			want: errs(invalid("series.count", "", "should be at least 2")),
		},
		{
			name:    "events.k8s.io/v1 series without lastObservedTime",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Series = &core.EventSeries{Count: 2} }),
			want:    errs(required("series.lastObservedTime", "")),
		},
		{
			name:    "events.k8s.io/v1 deprecatedFirstTimestamp set",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.FirstTimestamp = someTime }),
			want:    errs(invalid("firstTimestamp", "", "needs to be unset")),
		},
		{
			name:    "events.k8s.io/v1 deprecatedLastTimestamp set",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.LastTimestamp = someTime }),
			want:    errs(invalid("lastTimestamp", "", "needs to be unset")),
		},
		{
			name:    "events.k8s.io/v1 deprecatedCount set",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Count = 1 }),
			want:    errs(invalid("count", "", "needs to be unset")),
		},
		{
			name:    "events.k8s.io/v1 deprecatedSource.component set",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Source.Component = "kubelet" }),
			want:    errs(invalid("source", "", "needs to be unset")),
		},
		{
			name:    "events.k8s.io/v1 deprecatedSource.host set",
			version: eventsV1,
			event:   newStyleEvent(func(e *core.Event) { e.Source.Host = "node-a" }),
			want:    errs(invalid("source", "", "needs to be unset")),
		},
		{
			name:    "events.k8s.io/v1 old-style event reports legacy then strict errors in order",
			version: eventsV1,
			event:   oldStyleEvent(func(e *core.Event) { e.Name = "Pod:A" }),
			want: errs(
				invalid("metadata.name", "Pod:A", dnsSubdomainMsg),
				required("eventTime", ""),
				invalid("firstTimestamp", "", "needs to be unset"),
				invalid("lastTimestamp", "", "needs to be unset"),
				invalid("count", "", "needs to be unset"),
				invalid("source", "", "needs to be unset"),
			),
		},
		{
			name:    "no version is strict",
			version: noVersion,
			event:   oldStyleEvent(),
			want: errs(
				required("eventTime", ""),
				invalid("firstTimestamp", "", "needs to be unset"),
				invalid("lastTimestamp", "", "needs to be unset"),
				invalid("count", "", "needs to be unset"),
				invalid("source", "", "needs to be unset"),
			),
		},
		{
			name:    "no version names reportingController",
			version: noVersion,
			event:   newStyleEvent(func(e *core.Event) { e.ReportingController = "a/b/c" }),
			want: badController("reportingController", "a/b/c",
				"a valid label key "+strings.TrimPrefix(namePartFormatMsg, "name part ")+
					" with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
		},
		{
			name:    "no version accepts a valid new event",
			version: noVersion,
			event:   newStyleEvent(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ValidateEventCreate(tc.event, tc.version)
			assertErrors(t, tc.want, got)
		})
	}
}

func TestValidateEventUpdate(t *testing.T) {
	tests := []struct {
		name     string
		version  schema.GroupVersion
		old, new *core.Event
		want     field.ErrorList
	}{
		// Lenient versions: only the legacy checks on the new object.
		{
			name:    "core/v1 may change any field",
			version: coreV1,
			old:     oldStyleEvent(),
			new: oldStyleEvent(func(e *core.Event) {
				e.Name = "renamed"
				e.ResourceVersion = ""
				e.InvolvedObject.Name = "pod-b"
				e.Reason = "Killing"
				e.Message = "changed"
				e.Source = core.EventSource{}
				e.Count = 7
				e.Type = corev1.EventTypeWarning
				e.EventTime = metav1.NewMicroTime(time.Unix(1, 0))
				e.ReportingController = "kubelet"
				e.ReportingInstance = "node-a"
				e.Action = "Killed"
			}),
		},
		{
			name:    "core/v1 update still gets the legacy checks on the new object",
			version: coreV1,
			old:     oldStyleEvent(),
			new: oldStyleEvent(func(e *core.Event) {
				e.InvolvedObject.Namespace = "bar"
				e.EventTime = eventTime
			}),
			want: errs(
				required("reportingComponent", ""),
				badController("reportingComponent", "", namePartEmptyMsg, namePartFormatMsg),
				required("reportingInstance", ""),
				required("action", ""),
			),
		},
		{
			name:    "core/v1 update of an old event whose involvedObject namespace differs",
			version: coreV1,
			old:     &core.Event{},
			new:     oldStyleEvent(func(e *core.Event) { e.InvolvedObject.Namespace = "bar" }),
			want:    errs(invalid("involvedObject.namespace", "bar", "does not match event.namespace")),
		},
		{
			name:    "events.k8s.io/v1beta1 may change any field",
			version: eventsV1beta1,
			old:     newStyleEvent(),
			new: newStyleEvent(func(e *core.Event) {
				e.Reason = "Other"
				e.EventTime = metav1.NewMicroTime(time.Unix(1, 0))
				e.Series = &core.EventSeries{Count: 1}
			}),
		},
		{
			name:    "events.k8s.io/v1beta1 update names reportingController",
			version: eventsV1beta1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.ReportingController = "my-contr@ller" }),
			want:    badController("reportingController", "my-contr@ller", namePartFormatMsg),
		},

		// Strict: events.k8s.io/v1 and no version.
		{
			name:    "events.k8s.io/v1 unchanged event",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(),
		},
		{
			name:    "events.k8s.io/v1 series heartbeat and metadata change",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.Series = &core.EventSeries{Count: 2, LastObservedTime: eventTime} }),
			new: newStyleEvent(func(e *core.Event) {
				e.Series = &core.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(eventTime.Add(time.Minute))}
				e.Labels = map[string]string{"a": "b"}
				e.Annotations = map[string]string{"c": "d"}
			}),
		},
		{
			name:    "events.k8s.io/v1 changed series is validated",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Series = &core.EventSeries{Count: 1} }),
			want: errs(
				invalid("series.count", "", "should be at least 2"),
				required("series.lastObservedTime", ""),
			),
		},
		{
			name:    "events.k8s.io/v1 unchanged invalid series is not validated",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.Series = &core.EventSeries{Count: 1} }),
			new:     newStyleEvent(func(e *core.Event) { e.Series = &core.EventSeries{Count: 1} }),
		},
		{
			name:    "events.k8s.io/v1 removed series",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.Series = &core.EventSeries{Count: 2, LastObservedTime: eventTime} }),
			new:     newStyleEvent(),
		},
		{
			name:    "events.k8s.io/v1 update without resourceVersion",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.ResourceVersion = "" }),
			want:    errs(invalid("metadata.resourceVersion", "", "must be specified for an update")),
		},
		{
			name:    "events.k8s.io/v1 rename",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Name = "other" }),
			want:    errs(immutable("metadata.name", "other")),
		},
		{
			name:    "events.k8s.io/v1 unprefixed non-standard finalizer",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Finalizers = []string{"custom"} }),
			want: errs(invalid("metadata.finalizers[0]", "custom",
				"name is neither a standard finalizer name nor is it fully qualified")),
		},
		{
			name:    "events.k8s.io/v1 update does not require deprecated fields to be unset",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.Count = 4 }),
			new:     newStyleEvent(func(e *core.Event) { e.Count = 4 }),
		},
		{
			name:    "events.k8s.io/v1 regarding is immutable",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.InvolvedObject.Name = "node-b" }),
			want: errs(immutable("involvedObject",
				core.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-b"})),
		},
		{
			name:    "events.k8s.io/v1 reason is immutable and reported twice",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Reason = "Yeees" }),
			want:    errs(immutable("reason", "Yeees"), immutable("reason", "Yeees")),
		},
		{
			name:    "events.k8s.io/v1 note is immutable at path message",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.Message = "message" }),
			new:     newStyleEvent(func(e *core.Event) { e.Message = "new-message" }),
			want:    errs(immutable("message", "new-message")),
		},
		{
			name:    "events.k8s.io/v1 deprecatedSource is immutable",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.Source.Host = "host" }),
			new:     newStyleEvent(),
			want:    errs(immutable("source", core.EventSource{})),
		},
		{
			name:    "events.k8s.io/v1 deprecatedFirstTimestamp is immutable",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.FirstTimestamp = someTime }),
			new:     newStyleEvent(),
			want:    errs(immutable("firstTimestamp", metav1.Time{})),
		},
		{
			name:    "events.k8s.io/v1 deprecatedLastTimestamp is immutable",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.LastTimestamp = someTime }),
			want:    errs(immutable("lastTimestamp", someTime)),
		},
		{
			name:    "events.k8s.io/v1 deprecatedCount is immutable",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.Count = 2 }),
			new:     newStyleEvent(),
			want:    errs(immutable("count", int32(0))),
		},
		{
			name:    "events.k8s.io/v1 type is immutable",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Type = corev1.EventTypeWarning }),
			want:    errs(immutable("type", corev1.EventTypeWarning)),
		},
		{
			name:    "events.k8s.io/v1 action is immutable",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Action = "Undo" }),
			want:    errs(immutable("action", "Undo")),
		},
		{
			name:    "events.k8s.io/v1 related is immutable",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Related = &core.ObjectReference{APIVersion: "v1"} }),
			want:    errs(immutable("related", &core.ObjectReference{APIVersion: "v1"})),
		},
		{
			name:    "events.k8s.io/v1 reportingController is immutable",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.ReportingController = "k8s.io/other" }),
			want:    errs(immutable("reportingController", "k8s.io/other")),
		},
		{
			name:    "events.k8s.io/v1 reportingInstance is immutable",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.ReportingInstance = "node-xyz-new" }),
			want:    errs(immutable("reportingInstance", "node-xyz-new")),
		},
		{
			name:    "events.k8s.io/v1 eventTime is immutable",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.EventTime = metav1.NewMicroTime(eventTime.Add(time.Second)) }),
			want:    errs(immutable("eventTime", metav1.NewMicroTime(eventTime.Add(time.Second)))),
		},
		{
			name:    "events.k8s.io/v1 eventTime may change below a microsecond",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.EventTime = metav1.NewMicroTime(time.Unix(100, 5)) }),
			new:     newStyleEvent(func(e *core.Event) { e.EventTime = metav1.NewMicroTime(time.Unix(100, 6)) }),
		},
		{
			name:    "events.k8s.io/v1 eventTime truncated to microseconds may gain nanoseconds",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.EventTime = metav1.NewMicroTime(time.Unix(100, 5000)) }),
			new:     newStyleEvent(func(e *core.Event) { e.EventTime = metav1.NewMicroTime(time.Unix(100, 5999)) }),
		},
		{
			name:    "events.k8s.io/v1 eventTime may change location",
			version: eventsV1,
			old:     newStyleEvent(),
			new: newStyleEvent(func(e *core.Event) {
				e.EventTime = metav1.NewMicroTime(eventTime.In(time.FixedZone("CEST", 2*60*60)))
			}),
		},
		{
			name:    "events.k8s.io/v1 eventTime one nanosecond into the previous microsecond",
			version: eventsV1,
			old:     newStyleEvent(func(e *core.Event) { e.EventTime = metav1.NewMicroTime(time.Unix(100, 5000)) }),
			new:     newStyleEvent(func(e *core.Event) { e.EventTime = metav1.NewMicroTime(time.Unix(100, 4999)) }),
			want:    errs(immutable("eventTime", metav1.NewMicroTime(time.Unix(100, 4999)))),
		},
		{
			name:    "events.k8s.io/v1 every immutable field changed, in kube-apiserver's order",
			version: eventsV1,
			old:     oldStyleEvent(func(e *core.Event) { e.Namespace, e.InvolvedObject.Namespace = "kube-system", "" }),
			new: newStyleEvent(func(e *core.Event) {
				e.Message = "note"
				e.Type = corev1.EventTypeWarning
				e.Related = &core.ObjectReference{Kind: "Pod"}
			}),
			want: errs(
				immutable("metadata.name", "test"),
				immutable("involvedObject", core.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-a"}),
				immutable("reason", "Because"),
				immutable("message", "note"),
				immutable("source", core.EventSource{}),
				immutable("firstTimestamp", metav1.Time{}),
				immutable("lastTimestamp", metav1.Time{}),
				immutable("count", int32(0)),
				immutable("reason", "Because"),
				immutable("type", corev1.EventTypeWarning),
				immutable("eventTime", eventTime),
				immutable("action", "Do"),
				immutable("related", &core.ObjectReference{Kind: "Pod"}),
				immutable("reportingController", "k8s.io/my-controller"),
				immutable("reportingInstance", "node-xyz"),
			),
		},
		{
			name:    "events.k8s.io/v1 update runs the legacy checks first",
			version: eventsV1,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Namespace = "foo" }),
			want: errs(
				invalid("involvedObject.namespace", "", "does not match event.namespace"),
				immutable("metadata.namespace", "foo"),
			),
		},
		{
			name:    "no version update is strict",
			version: noVersion,
			old:     newStyleEvent(),
			new:     newStyleEvent(func(e *core.Event) { e.Action = "Undo" }),
			want:    errs(immutable("action", "Undo")),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ValidateEventUpdate(tc.new, tc.old, tc.version)
			assertErrors(t, tc.want, got)
		})
	}
}

// assertErrors compares what a client would see in the Status causes
// (type, field, bad value, detail) and the origin declarative validation
// matches on.
func assertErrors(t *testing.T, want, got field.ErrorList) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\ngot:  %s\nwant: %s", len(got), len(want), describe(got), describe(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.Type != w.Type || g.Field != w.Field || g.Detail != w.Detail || g.Origin != w.Origin ||
			fmt.Sprintf("%#v", g.BadValue) != fmt.Sprintf("%#v", w.BadValue) {
			t.Errorf("error %d:\ngot:  %s\nwant: %s", i, describeOne(g), describeOne(w))
		}
	}
}

func describe(list field.ErrorList) string {
	parts := make([]string, 0, len(list))
	for _, e := range list {
		parts = append(parts, describeOne(e))
	}
	return "[" + strings.Join(parts, ",\n       ") + "]"
}

func describeOne(e *field.Error) string {
	return fmt.Sprintf("{%s %s %#v %q origin=%q}", e.Type, e.Field, e.BadValue, e.Detail, e.Origin)
}
