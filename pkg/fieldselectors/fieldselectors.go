// Package fieldselectors declares which field selectors each served Event
// version accepts, how they map onto the internal Event, and which of them
// the watch cache indexes.
package fieldselectors

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// coreV1Labels are the labels core/v1 accepts; each maps to itself.
// kube-apiserver: pkg/apis/core/v1/conversion.go AddFieldLabelConversionsForEvent.
var coreV1Labels = map[string]string{
	"involvedObject.kind":            "involvedObject.kind",
	"involvedObject.namespace":       "involvedObject.namespace",
	"involvedObject.name":            "involvedObject.name",
	"involvedObject.uid":             "involvedObject.uid",
	"involvedObject.apiVersion":      "involvedObject.apiVersion",
	"involvedObject.resourceVersion": "involvedObject.resourceVersion",
	"involvedObject.fieldPath":       "involvedObject.fieldPath",
	"reason":                         "reason",
	"reportingComponent":             "reportingComponent",
	"source":                         "source",
	"type":                           "type",
	"metadata.namespace":             "metadata.namespace",
	"metadata.name":                  "metadata.name",
}

// eventsV1Labels: kube-apiserver pkg/apis/events/v1/conversion.go.
var eventsV1Labels = map[string]string{
	"reason":                    "reason",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reportingController":       "reportingComponent",
	"type":                      "type",
	"metadata.namespace":        "metadata.namespace",
	"metadata.name":             "metadata.name",
}

// AddFieldLabelConversions registers, for both external Event kinds, the
// conversion of their field labels to the internal (core/v1) vocabulary.
func AddFieldLabelConversions(scheme *runtime.Scheme) error {
	for gvk, table := range map[runtime.Object]map[string]string{
		&corev1.Event{}:   coreV1Labels,
		&eventsv1.Event{}: eventsV1Labels,
	} {
		kinds, _, err := scheme.ObjectKinds(gvk)
		if err != nil {
			return err
		}
		table := table
		if err := scheme.AddFieldLabelConversionFunc(kinds[0], func(label, value string) (string, string, error) {
			internal, ok := table[label]
			if !ok {
				return "", "", fmt.Errorf("field label not supported: %s", label)
			}
			return internal, value, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// SelectableFields returns the internal field set of an Event, as
// kube-apiserver's ToSelectableFields does.
func SelectableFields(event *core.Event) fields.Set {
	source := event.Source.Component
	if source == "" {
		source = event.ReportingController
	}
	specific := fields.Set{
		"involvedObject.kind":            event.InvolvedObject.Kind,
		"involvedObject.namespace":       event.InvolvedObject.Namespace,
		"involvedObject.name":            event.InvolvedObject.Name,
		"involvedObject.uid":             string(event.InvolvedObject.UID),
		"involvedObject.apiVersion":      event.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": event.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       event.InvolvedObject.FieldPath,
		"reason":                         event.Reason,
		"reportingComponent":             event.ReportingController,
		"source":                         source,
		"type":                           event.Type,
	}
	return generic.MergeFieldsSets(generic.ObjectMetaFieldsSet(&event.ObjectMeta, true), specific)
}

// GetAttrs is the storage.AttrFunc for Events.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	event, ok := obj.(*core.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an event")
	}
	return labels.Set(event.Labels), SelectableFields(event), nil
}

// Matcher is the registry's PredicateFunc.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{
		Label:    label,
		Field:    field,
		GetAttrs: GetAttrs,
	}
}
