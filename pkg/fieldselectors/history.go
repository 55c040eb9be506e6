package fieldselectors

import (
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// History's time window is two pseudo field labels, so that plain kubectl
// carries it: --field-selector regarding.uid=U,since=168h. They are no
// Event field: history reads them itself, `=` only, and they have no set
// form.
const (
	Since = "since"
	Until = "until"
)

// ContainsSuffix spells a text search on a history column that has a text
// index (history.ColumnDef.Searchable): note.contains=x509 holds for the
// records whose note holds "x509", ignoring case. kube-apiserver's field
// selector grammar (fields.ParseSelector) has `=`, `==` and `!=` only, and
// a label may hold dots, so the operator rides in the label as the window
// does: plain kubectl carries it, and the set grammar (setselector.go)
// leaves it alone (no parenthesis, no colon). It has `=` only, no set
// form; history reads it itself (pkg/registry/history).
const ContainsSuffix = ".contains"

// eventRecords is history's EventRecords: exactly the labels
// events.k8s.io/v1 accepts, spelled and answered as there, the window, and
// the labels of history's own columns (history.Columns, Own).
var eventRecords = &table{
	resource: historyv1alpha1.SchemeGroupVersion.WithResource("eventrecords"),
	kind:     historyv1alpha1.SchemeGroupVersion.WithKind("EventRecord"),
	fields:   eventsV1Labels,
	window:   append([]string{Since, Until}, historySearch()...),
	own:      historyOwn(),
}

// historySearch is the text search label of every Searchable column.
func historySearch() []string {
	var labels []string
	for _, c := range history.Columns {
		if c.Searchable {
			labels = append(labels, c.Field+ContainsSuffix)
		}
	}
	return labels
}

func historyOwn() []string {
	var own []string
	for _, c := range history.Columns {
		if c.Own {
			own = append(own, c.Field)
		}
	}
	return own
}

// PlainFields returns the plain internal fields a requirement on the internal
// field reads: the field itself, or the parts of an OR field.
func PlainFields(field string) []string {
	return consults(field)
}
