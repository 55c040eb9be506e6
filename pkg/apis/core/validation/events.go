// Package validation holds the rules an Event must satisfy on create and
// update. They mirror kube-apiserver v1.36.3 (pkg/apis/core/validation,
// events.go) rule for rule, with the same field paths and messages, so that
// a client sees the same 422 from this server as from kube-apiserver.
package validation

import (
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// Limits on "new" events (those with eventTime set). They count bytes, not
// runes, as kube-apiserver's len() checks do.
const (
	ReportingInstanceLengthLimit = 128
	ActionLengthLimit            = 128
	ReasonLengthLimit            = 128
	NoteLengthLimit              = 1024
)

// ValidateEventCreate validates an Event created through requestVersion.
// Every version gets the legacy checks; core/v1 and events.k8s.io/v1beta1
// stop there so that old recorders keep working. events.k8s.io/v1, and an
// empty GroupVersion (no request info in the context), get the strict ones.
func ValidateEventCreate(event *core.Event, requestVersion schema.GroupVersion) field.ErrorList {
	allErrs := validateLegacyEvent(event, requestVersion)
	if isLenientVersion(requestVersion) {
		return allErrs
	}

	allErrs = append(allErrs, validateObjectMeta(&event.ObjectMeta, field.NewPath("metadata"))...)
	allErrs = append(allErrs, validateSeries(event)...)
	if event.EventTime.Time == zeroTime {
		allErrs = append(allErrs, field.Required(field.NewPath("eventTime"), ""))
	}
	if event.Type != corev1.EventTypeNormal && event.Type != corev1.EventTypeWarning {
		allErrs = append(allErrs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", event.Type)))
	}
	// events.k8s.io/v1 exposes these as deprecated* fields that a new client
	// must leave alone; only core/v1 recorders fill them.
	if event.FirstTimestamp.Time != zeroTime {
		allErrs = append(allErrs, mustBeUnset("firstTimestamp"))
	}
	if event.LastTimestamp.Time != zeroTime {
		allErrs = append(allErrs, mustBeUnset("lastTimestamp"))
	}
	if event.Count != 0 {
		allErrs = append(allErrs, mustBeUnset("count"))
	}
	if event.Source.Component != "" || event.Source.Host != "" {
		allErrs = append(allErrs, mustBeUnset("source"))
	}
	return allErrs
}

// ValidateEventUpdate validates newEvent replacing oldEvent through
// requestVersion. Through core/v1 and events.k8s.io/v1beta1 any field may
// change; through events.k8s.io/v1 only the series and metadata may.
func ValidateEventUpdate(newEvent, oldEvent *core.Event, requestVersion schema.GroupVersion) field.ErrorList {
	allErrs := validateLegacyEvent(newEvent, requestVersion)
	if isLenientVersion(requestVersion) {
		return allErrs
	}

	allErrs = append(allErrs, validateObjectMetaUpdate(&newEvent.ObjectMeta, &oldEvent.ObjectMeta, field.NewPath("metadata"))...)
	// An unchanged series was accepted before; rejecting it now would block
	// metadata-only updates of events stored through core/v1.
	if !reflect.DeepEqual(newEvent.Series, oldEvent.Series) {
		allErrs = append(allErrs, validateSeries(newEvent)...)
	}

	immutable := func(newVal, oldVal any, path string) {
		allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(newVal, oldVal, field.NewPath(path))...)
	}
	immutable(newEvent.InvolvedObject, oldEvent.InvolvedObject, "involvedObject")
	immutable(newEvent.Reason, oldEvent.Reason, "reason")
	immutable(newEvent.Message, oldEvent.Message, "message")
	immutable(newEvent.Source, oldEvent.Source, "source")
	immutable(newEvent.FirstTimestamp, oldEvent.FirstTimestamp, "firstTimestamp")
	immutable(newEvent.LastTimestamp, oldEvent.LastTimestamp, "lastTimestamp")
	immutable(newEvent.Count, oldEvent.Count, "count")
	// kube-apiserver checks reason a second time at this point, so a changed
	// reason yields two identical causes; keep it to return the same Status.
	immutable(newEvent.Reason, oldEvent.Reason, "reason")
	immutable(newEvent.Type, oldEvent.Type, "type")
	// Clients that serialize with microsecond precision (JSON, correct
	// protobuf) and clients that send nanoseconds must both be able to update
	// the same event, so only a change visible at microsecond precision counts
	// (kubernetes/kubernetes#111928).
	if newEvent.EventTime.Truncate(time.Microsecond).UTC() != oldEvent.EventTime.Truncate(time.Microsecond).UTC() {
		immutable(newEvent.EventTime, oldEvent.EventTime, "eventTime")
	}
	immutable(newEvent.Action, oldEvent.Action, "action")
	immutable(newEvent.Related, oldEvent.Related, "related")
	immutable(newEvent.ReportingController, oldEvent.ReportingController, "reportingController")
	immutable(newEvent.ReportingInstance, oldEvent.ReportingInstance, "reportingInstance")
	return allErrs
}

// zeroTime is compared with ==, not IsZero, as kube-apiserver does: a zero
// instant decoded into a non-UTC location (e.g. "0001-01-01T00:00:00Z" in
// JSON becomes Local) counts as set there, and must here too.
var zeroTime = time.Time{}

func isLenientVersion(gv schema.GroupVersion) bool {
	return gv == corev1.SchemeGroupVersion || gv == eventsv1beta1.SchemeGroupVersion
}

func mustBeUnset(path string) *field.Error {
	return field.Invalid(field.NewPath(path), "", "needs to be unset")
}

func validateSeries(event *core.Event) field.ErrorList {
	var allErrs field.ErrorList
	if event.Series == nil {
		return allErrs
	}
	if event.Series.Count < 2 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if event.Series.LastObservedTime.Time == zeroTime {
		allErrs = append(allErrs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return allErrs
}

// validateLegacyEvent holds the checks every request version gets. Whether an
// event is "new" is decided by eventTime alone, so a core/v1 client that sets
// eventTime gets the new-event checks too.
func validateLegacyEvent(event *core.Event, requestVersion schema.GroupVersion) field.ErrorList {
	allErrs := field.ErrorList{}
	involvedNamespace := field.NewPath("involvedObject", "namespace")

	if event.EventTime.Time == zeroTime {
		// An old event about a cluster-scoped object may live in "" or, for
		// old clients, "default"; otherwise the namespaces must agree.
		switch {
		case event.InvolvedObject.Namespace == "":
			if event.Namespace != metav1.NamespaceNone && event.Namespace != metav1.NamespaceDefault {
				allErrs = append(allErrs, field.Invalid(involvedNamespace, event.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		case event.Namespace != event.InvolvedObject.Namespace:
			allErrs = append(allErrs, field.Invalid(involvedNamespace, event.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		// A new event about a cluster-scoped object lives in default or
		// kube-system; a mismatched non-empty namespace is not rejected here.
		if event.InvolvedObject.Namespace == "" && event.Namespace != metav1.NamespaceDefault && event.Namespace != metav1.NamespaceSystem {
			allErrs = append(allErrs, field.Invalid(involvedNamespace, event.InvolvedObject.Namespace, "does not match event.namespace"))
		}

		// The same internal field is reportingComponent in core/v1.
		controllerPath := field.NewPath("reportingController")
		if requestVersion == corev1.SchemeGroupVersion {
			controllerPath = field.NewPath("reportingComponent")
		}
		if event.ReportingController == "" {
			allErrs = append(allErrs, field.Required(controllerPath, ""))
		}
		for _, msg := range utilvalidation.IsQualifiedName(event.ReportingController) {
			allErrs = append(allErrs, field.Invalid(controllerPath, event.ReportingController, msg).WithOrigin("format=qualified-name"))
		}

		allErrs = append(allErrs, requiredWithLimit(event.ReportingInstance, ReportingInstanceLengthLimit, field.NewPath("reportingInstance"))...)
		allErrs = append(allErrs, requiredWithLimit(event.Action, ActionLengthLimit, field.NewPath("action"))...)
		allErrs = append(allErrs, requiredWithLimit(event.Reason, ReasonLengthLimit, field.NewPath("reason"))...)
		// events.k8s.io/v1 calls it note, but the path is the internal name,
		// as in kube-apiserver.
		if len(event.Message) > NoteLengthLimit {
			allErrs = append(allErrs, tooLong(field.NewPath("message"), NoteLengthLimit))
		}
	}

	// The path is "namespace", not "metadata.namespace": kube-apiserver's
	// message, kept for clients that match on it.
	for _, msg := range utilvalidation.IsDNS1123Subdomain(event.Namespace) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("namespace"), event.Namespace, msg))
	}
	return allErrs
}

func requiredWithLimit(value string, limit int, path *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if value == "" {
		allErrs = append(allErrs, field.Required(path, ""))
	}
	if len(value) > limit {
		allErrs = append(allErrs, tooLong(path, limit))
	}
	return allErrs
}

// tooLong reports an empty bad value, not the string, because kube-apiserver
// does and the Status must read the same.
func tooLong(path *field.Path, limit int) *field.Error {
	return field.Invalid(path, "", fmt.Sprintf("can have at most %v characters", limit))
}
