package event

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// columns are kube-apiserver's Event columns (pkg/printers/internalversion),
// the same for both groups because the table is built from the internal Event.
var columns = []metav1.TableColumnDefinition{
	{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
	{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
	{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
	{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
	{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
	{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
	{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
	{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
	// Declared a string but filled with an int64, exactly as kube-apiserver does.
	{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
	{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
}

// TableConvertor is the Event store's table: the columns of kubectl get
// events, as kube-apiserver prints them.
type TableConvertor struct{}

// ConvertToTable always fills every column, as kube-apiserver's table
// convertor does; clients hide the priority-1 ones unless -o wide.
func (TableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	noHeaders := false
	if tableOptions != nil {
		opts, ok := tableOptions.(*metav1.TableOptions)
		if !ok {
			return nil, fmt.Errorf("unrecognized type %T for table options, can't display tabular output", tableOptions)
		}
		if opts != nil {
			noHeaders = opts.NoHeaders
		}
	}

	table := &metav1.Table{}
	if !noHeaders {
		table.ColumnDefinitions = columns
	}
	now := time.Now()
	switch t := obj.(type) {
	case *core.Event:
		table.Rows = []metav1.TableRow{eventRow(t, now)}
	case *core.EventList:
		table.Rows = make([]metav1.TableRow, 0, len(t.Items))
		for i := range t.Items {
			table.Rows = append(table.Rows, eventRow(&t.Items[i], now))
		}
	default:
		return nil, fmt.Errorf("cannot print %T as an Event table", obj)
	}

	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

func eventRow(event *core.Event, now time.Time) metav1.TableRow {
	firstSeen := since(now, event.FirstTimestamp.Time)
	if event.FirstTimestamp.IsZero() {
		firstSeen = since(now, event.EventTime.Time)
	}
	lastSeen := since(now, event.LastTimestamp.Time)
	if event.LastTimestamp.IsZero() {
		lastSeen = firstSeen
	}
	count := event.Count
	if event.Series != nil {
		lastSeen = since(now, event.Series.LastObservedTime.Time)
		count = event.Series.Count
	} else if count == 0 {
		// events.k8s.io singletons carry no count.
		count = 1
	}

	object := strings.ToLower(event.InvolvedObject.Kind)
	if event.InvolvedObject.Name != "" {
		object += "/" + event.InvolvedObject.Name
	}

	source := firstNonEmpty(event.Source.Component, event.ReportingController)
	if instance := firstNonEmpty(event.Source.Host, event.ReportingInstance); instance != "" {
		source += ", " + instance
	}

	return metav1.TableRow{
		Object: runtime.RawExtension{Object: event},
		Cells: []interface{}{
			lastSeen,
			event.Type,
			event.Reason,
			object,
			event.InvolvedObject.FieldPath,
			source,
			strings.TrimSpace(event.Message),
			firstSeen,
			int64(count),
			event.Name,
		},
	}
}

func since(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
