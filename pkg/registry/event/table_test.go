package event

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// TestEventRow pins the fallbacks kube-apiserver's Event printer
// (pkg/printers/internalversion printEvent) takes when a field is empty,
// which is how core/v1 and events.k8s.io/v1 Events print alike.
func TestEventRow(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	microAgo := func(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(now.Add(-d)) }
	// Cells: last seen, type, reason, object, subobject, source, message,
	// first seen, count, name.
	for _, tc := range []struct {
		name  string
		event core.Event
		want  []interface{}
	}{
		{
			name: "core/v1 event",
			event: core.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e"},
				InvolvedObject: core.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{app}"},
				Type:           "Normal", Reason: "Started", Message: " Started container \n",
				Source:         core.EventSource{Component: "kubelet", Host: "node-1"},
				FirstTimestamp: ago(time.Hour), LastTimestamp: ago(5 * time.Minute), Count: 3,
			},
			want: []interface{}{"5m", "Normal", "Started", "pod/web", "spec.containers{app}", "kubelet, node-1", "Started container", "60m", int64(3), "e"},
		},
		{
			name: "events.k8s.io/v1 singleton: eventTime, reporting fields, count 1",
			event: core.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e"},
				InvolvedObject: core.ObjectReference{Kind: "Pod", Name: "web"},
				Type:           "Normal", Reason: "Scheduled", Message: "assigned",
				EventTime:           microAgo(2 * time.Minute),
				ReportingController: "default-scheduler", ReportingInstance: "scheduler-1",
			},
			want: []interface{}{"2m", "Normal", "Scheduled", "pod/web", "", "default-scheduler, scheduler-1", "assigned", "2m", int64(1), "e"},
		},
		{
			name: "series: last seen and count from the series",
			event: core.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e"},
				InvolvedObject: core.ObjectReference{Kind: "Node", Name: "node-1"},
				Type:           "Warning", Reason: "Rebooted",
				EventTime:           microAgo(10 * time.Minute),
				Series:              &core.EventSeries{Count: 7, LastObservedTime: microAgo(30 * time.Second)},
				ReportingController: "kubelet",
			},
			want: []interface{}{"30s", "Warning", "Rebooted", "node/node-1", "", "kubelet", "", "10m", int64(7), "e"},
		},
		{
			name: "no name, no instance, no timestamps",
			event: core.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e"},
				InvolvedObject: core.ObjectReference{Kind: "Cluster"},
				Source:         core.EventSource{Component: "controller"},
			},
			want: []interface{}{"<unknown>", "", "", "cluster", "", "controller", "", "<unknown>", int64(1), "e"},
		},
		{
			name: "source component wins over reporting controller",
			event: core.Event{
				ObjectMeta:          metav1.ObjectMeta{Name: "e"},
				Source:              core.EventSource{Component: "kubelet"},
				ReportingController: "other", ReportingInstance: "instance",
				FirstTimestamp: ago(time.Minute), Count: 2,
			},
			want: []interface{}{"60s", "", "", "", "", "kubelet, instance", "", "60s", int64(2), "e"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := eventRow(&tc.event, now)
			if !reflect.DeepEqual(row.Cells, tc.want) {
				t.Errorf("cells\n%#v\nwant\n%#v", row.Cells, tc.want)
			}
			if len(row.Cells) != len(columns) {
				t.Errorf("%d cells for %d columns", len(row.Cells), len(columns))
			}
			if row.Object.Object != &tc.event {
				t.Errorf("row object %v, want the Event", row.Object.Object)
			}
		})
	}
}

// TestConvertToTable: headers unless noHeaders, one row per Event, list
// metadata carried over, and a clear error for what is not an Event.
func TestConvertToTable(t *testing.T) {
	event := core.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", ResourceVersion: "5"}}
	remaining := int64(3)
	list := &core.EventList{
		ListMeta: metav1.ListMeta{ResourceVersion: "9", Continue: "token", RemainingItemCount: &remaining},
		Items:    []core.Event{event, event},
	}
	for _, tc := range []struct {
		name        string
		obj         runtime.Object
		options     runtime.Object
		wantColumns int
		wantRows    int
		wantRV      string
		wantErr     bool
	}{
		{name: "one Event", obj: &event, wantColumns: len(columns), wantRows: 1, wantRV: "5"},
		{name: "list", obj: list, options: &metav1.TableOptions{}, wantColumns: len(columns), wantRows: 2, wantRV: "9"},
		{name: "no headers", obj: list, options: &metav1.TableOptions{NoHeaders: true}, wantRows: 2, wantRV: "9"},
		{name: "empty list", obj: &core.EventList{}, wantColumns: len(columns)},
		{name: "not an Event", obj: &metav1.Status{}, wantErr: true},
		{name: "bad options", obj: &event, options: &metav1.Status{}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := TableConvertor{}.ConvertToTable(context.Background(), tc.obj, tc.options)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(table.ColumnDefinitions) != tc.wantColumns || len(table.Rows) != tc.wantRows || table.ResourceVersion != tc.wantRV {
				t.Fatalf("%d columns, %d rows, rv %q; want %d, %d, %q",
					len(table.ColumnDefinitions), len(table.Rows), table.ResourceVersion, tc.wantColumns, tc.wantRows, tc.wantRV)
			}
			if tc.obj == list && (table.Continue != "token" || table.RemainingItemCount == nil || *table.RemainingItemCount != 3) {
				t.Errorf("continue %q, remaining %v: list metadata not carried over", table.Continue, table.RemainingItemCount)
			}
		})
	}
}
