package history

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
)

// columns of `kubectl events` (k8s.io/kubectl/pkg/cmd/events), then ours.
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Last Seen", Type: "string", Description: "When the Event last happened, and how often over how long."},
	{Name: "Type", Type: "string", Description: "Normal or Warning."},
	{Name: "Reason", Type: "string", Description: "Why the action was taken."},
	{Name: "Object", Type: "string", Description: "The object the Event is about."},
	{Name: "Message", Type: "string", Description: "A human-readable description."},
	{Name: "Live", Type: "boolean", Priority: 1, Description: "Whether the Event is still served by the Events API."},
	{Name: "Cluster", Type: "string", Priority: 1, Description: "The cluster the Event happened in."},
	{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: "<event name>.<event resourceVersion>."},
}

type tableConvertor struct{}

func (tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || opts == nil || !opts.NoHeaders {
		table.ColumnDefinitions = tableColumns
	}
	now := time.Now()
	switch t := obj.(type) {
	case *historyapi.EventRecord:
		table.Rows = []metav1.TableRow{recordRow(t, now)}
	case *historyapi.EventRecordList:
		table.Rows = make([]metav1.TableRow, 0, len(t.Items))
		for i := range t.Items {
			table.Rows = append(table.Rows, recordRow(&t.Items[i], now))
		}
	default:
		return nil, fmt.Errorf("cannot print %T as an EventRecord table", obj)
	}
	// As the generic table convertor (rest.defaultTableConvertor): kubectl
	// get -w watches from the table's resourceVersion.
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

// recordRow fills the columns as `kubectl events` does (printOneEvent).
func recordRow(r *historyapi.EventRecord, now time.Time) metav1.TableRow {
	e := &r.Event
	lastSeen := since(now, r.LastSeen.Time)
	count := e.Count
	first := e.FirstTimestamp.Time
	if e.Series != nil {
		count = e.Series.Count
		first = e.EventTime.Time
	}
	if count > 1 && !first.IsZero() {
		lastSeen = fmt.Sprintf("%s (x%d over %s)", lastSeen, count, since(now, first))
	}
	return metav1.TableRow{
		Object: runtime.RawExtension{Object: r},
		Cells: []interface{}{
			lastSeen,
			e.Type,
			e.Reason,
			e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
			strings.TrimSpace(e.Message),
			r.Live,
			r.Cluster,
			r.Name,
		},
	}
}

func since(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
