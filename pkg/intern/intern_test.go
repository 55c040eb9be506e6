package intern

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// fresh returns a kubelet-like Event whose every string and byte slice is
// its own allocation, as a decoder makes them.
func fresh(name string) *core.Event {
	c := func(s string) string { return string([]byte(s)) }
	return &core.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name: c(name), Namespace: c("default"),
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: c("kubelet"), Operation: metav1.ManagedFieldsOperationType(c("Update")), APIVersion: c("v1"), FieldsType: c("FieldsV1"),
				FieldsV1: metav1.NewFieldsV1(`{"f:count":{},"f:reason":{}}`),
			}},
		},
		InvolvedObject: core.ObjectReference{Kind: c("Pod"), Namespace: c("default"), Name: c("web-1"), UID: "uid-1", APIVersion: c("v1")},
		Reason:         c("Pulled"),
		Message:        c("Container image pulled"),
		Source:         core.EventSource{Component: c("kubelet"), Host: c("node-1")},
		Type:           c("Normal"),
		Related:        &core.ObjectReference{Kind: c("ReplicaSet"), Name: c("web")},
	}
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestEventSharesWhatRepeats(t *testing.T) {
	a, b := fresh("web-1.a"), fresh("web-1.b")
	Event(a)
	Event(b)
	shared := []struct {
		name string
		a, b string
	}{
		{"namespace", a.Namespace, b.Namespace},
		{"manager", a.ManagedFields[0].Manager, b.ManagedFields[0].Manager},
		{"operation", string(a.ManagedFields[0].Operation), string(b.ManagedFields[0].Operation)},
		{"fieldsType", a.ManagedFields[0].FieldsType, b.ManagedFields[0].FieldsType},
		{"kind", a.InvolvedObject.Kind, b.InvolvedObject.Kind},
		{"involved name", a.InvolvedObject.Name, b.InvolvedObject.Name},
		{"involved uid", string(a.InvolvedObject.UID), string(b.InvolvedObject.UID)},
		{"reason", a.Reason, b.Reason},
		{"message", a.Message, b.Message},
		{"host", a.Source.Host, b.Source.Host},
		{"type", a.Type, b.Type},
		{"related kind", a.Related.Kind, b.Related.Kind},
	}
	for _, s := range shared {
		if s.a != s.b {
			t.Errorf("%s: values changed: %q, %q", s.name, s.a, s.b)
		}
		if !same(s.a, s.b) {
			t.Errorf("%s: not shared", s.name)
		}
	}
	if ra, rb := a.ManagedFields[0].FieldsV1.GetRawBytes(), b.ManagedFields[0].FieldsV1.GetRawBytes(); &ra[0] != &rb[0] {
		t.Error("fieldsV1: not shared")
	}
	if same(a.Name, b.Name) {
		t.Error("names differ, yet share")
	}
	if a.Name != "web-1.a" || a.Namespace != "default" || a.ManagedFields[0].FieldsV1.GetRawString() != `{"f:count":{},"f:reason":{}}` {
		t.Errorf("values changed: %+v", a)
	}
	// A writer appending to the shared bytes must get its own array.
	raw := a.ManagedFields[0].FieldsV1.GetRawBytes()
	if cap(raw) != len(raw) {
		t.Errorf("shared bytes have spare capacity %d over %d: an append would write into every Event", cap(raw), len(raw))
	}
}

// TestEventGathersItsOwnStrings: an Event's name and UID, which no other
// Event shares, end up in one allocation, unchanged.
func TestEventGathersItsOwnStrings(t *testing.T) {
	e := fresh("web-1.17f3a2b4c5d6e7f8")
	e.UID = "6a3b4c1d-9e2f-4a5b-8c7d-0123456789ab"
	Event(e)
	if e.Name != "web-1.17f3a2b4c5d6e7f8" || e.UID != "6a3b4c1d-9e2f-4a5b-8c7d-0123456789ab" {
		t.Fatalf("name and UID changed: %q, %q", e.Name, e.UID)
	}
	if unsafe.Pointer(unsafe.StringData(string(e.UID))) != unsafe.Add(unsafe.Pointer(unsafe.StringData(e.Name)), len(e.Name)) {
		t.Error("the UID does not follow the name in one allocation")
	}
	named := &core.Event{ObjectMeta: metav1.ObjectMeta{Name: "only-a-name"}}
	Event(named)
	if named.Name != "only-a-name" || named.UID != "" {
		t.Errorf("an Event without a UID changed: %q, %q", named.Name, named.UID)
	}
}

func TestEventLeavesEmptyValues(t *testing.T) {
	e := &core.Event{}
	Event(e)
	if e.Namespace != "" || e.Related != nil || e.ManagedFields != nil {
		t.Errorf("an empty Event changed: %+v", e)
	}
}

// TestBytesKeepsItsOwnCopy: the canonical copy is the table's own, not the
// decoder's buffer it was looked up with, so a buffer reused or written
// after the decode changes no cached Event.
func TestBytesKeepsItsOwnCopy(t *testing.T) {
	decoded := []byte(`{"f:type":{},"f:reason":{},"f:TestBytesKeepsItsOwnCopy":{}}`)
	canonical := bytes(decoded)
	want := string(decoded)
	for i := range decoded {
		decoded[i] = 'x'
	}
	if string(canonical) != want {
		t.Fatalf("the canonical copy changed with the buffer it was made from: %q", canonical)
	}
}

// TestManagedFieldsShared: Events whose one managedFields entry is equal,
// time included, share it; any difference keeps an Event's own.
func TestManagedFieldsShared(t *testing.T) {
	at := func(e *core.Event, sec int64) *core.Event {
		when := metav1.NewTime(time.Unix(sec, 0))
		e.ManagedFields[0].Time = &when
		return e
	}
	a := at(fresh("web-1.a"), 1_700_000_000)
	b := at(fresh("web-1.b"), 1_700_000_000)
	later := at(fresh("web-1.c"), 1_700_000_001)
	apply := at(fresh("web-1.d"), 1_700_000_000)
	apply.ManagedFields[0].Operation = metav1.ManagedFieldsOperationApply
	noTime := fresh("web-1.e")
	two := at(fresh("web-1.f"), 1_700_000_000)
	two.ManagedFields = append(two.ManagedFields, *two.ManagedFields[0].DeepCopy())
	want := a.ManagedFields[0].DeepCopy()

	for _, e := range []*core.Event{a, b, later, apply, noTime, two} {
		Event(e)
	}
	if &a.ManagedFields[0] != &b.ManagedFields[0] {
		t.Error("equal entries are not shared")
	}
	if !reflect.DeepEqual(&b.ManagedFields[0], want) {
		t.Errorf("the shared entry differs from the Event's own: %+v, want %+v", b.ManagedFields[0], want)
	}
	for name, e := range map[string]*core.Event{"a second later": later, "another operation": apply, "no time": noTime, "two entries": two} {
		if &e.ManagedFields[0] == &a.ManagedFields[0] {
			t.Errorf("%s: shares an entry that differs", name)
		}
	}
	if len(two.ManagedFields) != 2 {
		t.Errorf("two entries became %d", len(two.ManagedFields))
	}
	// A writer appending to a shared slice must get its own array.
	if cap(a.ManagedFields) != 1 || cap(b.ManagedFields) != 1 {
		t.Errorf("managedFields capacities %d and %d: an append would write into a shared array", cap(a.ManagedFields), cap(b.ManagedFields))
	}
}
