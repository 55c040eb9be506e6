package history

import (
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// Version is one Event version as etcd held it at Revision.
type Version struct {
	UID       string
	Revision  int64
	Namespace string
	Name      string

	// The columns the read API filters on, one per entry of Columns.
	RegardingUID        string
	RegardingName       string
	RegardingNamespace  string
	RegardingKind       string
	RelatedUID          string
	RelatedName         string
	Reason              string
	Type                string
	ReportingController string
	Note                string
	// Cluster is the member cluster the version was captured from, empty
	// for the server's own cluster (ColumnCluster).
	Cluster string

	// LastSeen is when the Event last happened, as `kubectl events` shows
	// it; the time window and the order of the read API use it.
	LastSeen time.Time
	// ObservedAt is when capture saw this version; retention uses it.
	ObservedAt time.Time
	// Object is the value etcd held: core/v1 protobuf in the k8s envelope.
	Object []byte
}

// Column is a filterable property of a Version, named as SQL stores name
// their column.
type Column string

const (
	ColumnNamespace           Column = "namespace"
	ColumnName                Column = "name"
	ColumnRegardingUID        Column = "regarding_uid"
	ColumnRegardingName       Column = "regarding_name"
	ColumnRegardingNamespace  Column = "regarding_namespace"
	ColumnRegardingKind       Column = "regarding_kind"
	ColumnRelatedUID          Column = "related_uid"
	ColumnRelatedName         Column = "related_name"
	ColumnReason              Column = "reason"
	ColumnType                Column = "type"
	ColumnReportingController Column = "reporting_controller"
	ColumnNote                Column = "note"
	ColumnCluster             Column = "cluster"
)

// ColumnDef is everything about a filterable column but its migration: a
// new column is one entry here, a field of Version, and one migration per
// database (which adds it to the versions table, and its index if any).
// Every column is a string: the database's text type.
type ColumnDef struct {
	Name Column
	// Field is the internal field label (pkg/fieldselectors' vocabulary,
	// core/v1's spelling) whose requirements the column answers.
	Field string
	// Own marks a Field no Events API offers, a field label eventrecords
	// alone accept, spelled as events.k8s.io/v1 spells the Event's field:
	// the reader matches it on the decoded Event through Event (Match),
	// fieldselectors knowing nothing of it.
	Own bool
	// Value is the Version's field that holds the column.
	Value func(*Version) *string
	// Event reads the column from a decoded Event: NewVersion, and Match.
	// Nil for a column the Event does not hold, which capture's source
	// sets (the cluster): its migration gives the versions stored before
	// it a value, so the store alone answers conditions on it.
	Event func(*core.Event) string
	// Proto is where capture's fast path finds the column in a core/v1
	// Event's protobuf: the field numbers from the Event message down
	// (k8s.io/api/core/v1 generated.proto; they never change once
	// released). TestVersionFromProto holds it to Event on fuzzed Events.
	Proto []protowire.Number
	// Narrowing columns pick one object's versions out of millions by
	// equality: each has its index, and beside one the namespace's own
	// index is the wrong road (Query.Where).
	Narrowing bool
	// Sparse columns are empty in most versions: where the database
	// allows, their index holds only the others.
	Sparse bool
	// Added marks a column a migration added after each database's first
	// versioned schema: versions stored before it (or by an older server
	// still writing) hold NULL there, which a condition on the column keeps
	// for the reader to match on the Event (Match), so that nothing needs
	// rewriting when a column comes. A column without Event takes a
	// default instead, which the store matches itself.
	Added bool
	// Searchable columns answer Condition.Contains from a trigram index
	// in every store (search.go).
	Searchable bool
}

// Field numbers of k8s.io/api/core/v1's Event, ObjectMeta and
// ObjectReference that columns are read from.
const (
	protoEventMetadata  = 1
	protoEventInvolved  = 2
	protoEventReason    = 3
	protoEventMessage   = 4
	protoEventType      = 9
	protoEventRelated   = 13
	protoEventReporting = 14
	protoMetaName       = 1
	protoMetaNamespace  = 3
	protoRefKind        = 1
	protoRefNamespace   = 2
	protoRefName        = 3
	protoRefUID         = 4
)

func proto(path ...protowire.Number) []protowire.Number { return path }

// related reads one field of an Event's related object, "" without one.
func related(get func(*core.ObjectReference) string) func(*core.Event) string {
	return func(e *core.Event) string {
		if e.Related == nil {
			return ""
		}
		return get(e.Related)
	}
}

// Columns is every filterable column, in the order SQL stores list them.
var Columns = []ColumnDef{
	{Name: ColumnNamespace, Field: "metadata.namespace",
		Value: func(v *Version) *string { return &v.Namespace },
		Event: func(e *core.Event) string { return e.Namespace }, Proto: proto(protoEventMetadata, protoMetaNamespace)},
	{Name: ColumnName, Field: "metadata.name",
		Value: func(v *Version) *string { return &v.Name },
		Event: func(e *core.Event) string { return e.Name }, Proto: proto(protoEventMetadata, protoMetaName)},
	{Name: ColumnRegardingUID, Field: "involvedObject.uid", Narrowing: true,
		Value: func(v *Version) *string { return &v.RegardingUID },
		Event: func(e *core.Event) string { return string(e.InvolvedObject.UID) }, Proto: proto(protoEventInvolved, protoRefUID)},
	{Name: ColumnRegardingName, Field: "involvedObject.name", Narrowing: true,
		Value: func(v *Version) *string { return &v.RegardingName },
		Event: func(e *core.Event) string { return e.InvolvedObject.Name }, Proto: proto(protoEventInvolved, protoRefName)},
	{Name: ColumnRegardingNamespace, Field: "involvedObject.namespace",
		Value: func(v *Version) *string { return &v.RegardingNamespace },
		Event: func(e *core.Event) string { return e.InvolvedObject.Namespace }, Proto: proto(protoEventInvolved, protoRefNamespace)},
	{Name: ColumnRegardingKind, Field: "involvedObject.kind",
		Value: func(v *Version) *string { return &v.RegardingKind },
		Event: func(e *core.Event) string { return e.InvolvedObject.Kind }, Proto: proto(protoEventInvolved, protoRefKind)},
	{Name: ColumnRelatedUID, Field: "related.uid", Narrowing: true, Sparse: true,
		Value: func(v *Version) *string { return &v.RelatedUID },
		Event: related(func(r *core.ObjectReference) string { return string(r.UID) }), Proto: proto(protoEventRelated, protoRefUID)},
	{Name: ColumnRelatedName, Field: "related.name", Narrowing: true, Sparse: true,
		Value: func(v *Version) *string { return &v.RelatedName },
		Event: related(func(r *core.ObjectReference) string { return r.Name }), Proto: proto(protoEventRelated, protoRefName)},
	{Name: ColumnReason, Field: "reason",
		Value: func(v *Version) *string { return &v.Reason },
		Event: func(e *core.Event) string { return e.Reason }, Proto: proto(protoEventReason)},
	{Name: ColumnType, Field: "type",
		Value: func(v *Version) *string { return &v.Type },
		Event: func(e *core.Event) string { return e.Type }, Proto: proto(protoEventType)},
	{Name: ColumnReportingController, Field: "reportingComponent",
		Value: func(v *Version) *string { return &v.ReportingController },
		Event: func(e *core.Event) string { return e.ReportingController }, Proto: proto(protoEventReporting)},
	// events.k8s.io/v1's note, core/v1's message: no Events API selects
	// on it (kube-apiserver answers 400), eventrecords do.
	{Name: ColumnNote, Field: "note", Own: true, Added: true, Searchable: true,
		Value: func(v *Version) *string { return &v.Note },
		Event: func(e *core.Event) string { return e.Message }, Proto: proto(protoEventMessage)},
	// The member cluster of a fleet the version came from; "" is the
	// server's own cluster (--history-cluster-name), which is also what
	// versions stored before the column read as (the migration's default),
	// so that renaming the server's cluster renames all its history at once.
	{Name: ColumnCluster, Field: "cluster", Own: true, Added: true,
		Value: func(v *Version) *string { return &v.Cluster }},
}

// NullBefore reports whether versions stored before the column came hold
// NULL there: an Added column read from the Event. An Added column with no
// Event (the cluster) came with a default that is right for every older
// version.
func (c *ColumnDef) NullBefore() bool { return c.Added && c.Event != nil }

// columnsByName and columnsByField index Columns.
var columnsByName, columnsByField = func() (map[Column]*ColumnDef, map[string]*ColumnDef) {
	byName, byField := map[Column]*ColumnDef{}, map[string]*ColumnDef{}
	for i := range Columns {
		byName[Columns[i].Name] = &Columns[i]
		byField[Columns[i].Field] = &Columns[i]
	}
	return byName, byField
}()

// LookupColumn finds a column by its name.
func LookupColumn(name Column) (*ColumnDef, bool) {
	c, ok := columnsByName[name]
	return c, ok
}

// ColumnFor finds the column that answers requirements on an internal field
// label, or on an Own label.
func ColumnFor(field string) (*ColumnDef, bool) {
	c, ok := columnsByField[field]
	return c, ok
}

// Match reports whether the Event passes the condition as the stores'
// filter reads it (Query.Where): one of the columns holds the value (or one
// of Values), or with Not, none does.
func (c Condition) Match(e *core.Event) bool {
	if c.Contains {
		for _, name := range c.Columns {
			if col, ok := columnsByName[name]; ok && col.Event != nil && search.ContainsFold(col.Event(e), c.Value) {
				return !c.Not
			}
		}
		return c.Not
	}
	values := c.Values
	if len(values) == 0 {
		values = []string{c.Value}
	}
	for _, name := range c.Columns {
		col, ok := columnsByName[name]
		if ok && col.Event == nil {
			// The store answered it: nothing in the Event to match.
			return true
		}
		if ok && slices.Contains(values, col.Event(e)) {
			return !c.Not
		}
	}
	return c.Not
}
