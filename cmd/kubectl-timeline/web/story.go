package web

import (
	"time"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

// Query is the story the page asks for: the Events of every object that bore
// Kind (of Group) and Name in Namespace (every namespace when All), as
// `kubectl timeline KIND/NAME` prints them.
type Query struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	All       bool   `json:"allNamespaces"`
	// Tree folds in the Events of the objects the cluster says the object
	// owns (a Deployment's ReplicaSets and their Pods).
	Tree bool `json:"tree"`
	// Cluster narrows the story to one cluster's records (cluster=), on a
	// fleet's hub a member's: from history alone, as --cluster reads.
	Cluster string          `json:"cluster,omitempty"`
	Filter  timeline.Filter `json:"-"`
}

// Config is what the command line asked for: the page's first story.
type Config struct {
	Query Query `json:"query"`
	// Since is the earliest last-seen time shown (Unix milliseconds), 0
	// for all that are kept.
	Since int64    `json:"since"`
	Types []string `json:"types"`
	Watch bool     `json:"watch"`
}

// Story is one object's Events and what is known about the objects they
// are about.
type Story struct {
	Query Query `json:"query"`
	// History says whether history could be read; where not, Records are
	// the live Events only, and Reason says why (as the terminal says).
	History Availability `json:"history"`
	// Objects are the ones the cluster holds now: the object (each
	// namespace's, with -A) and, with Tree, what it owns. An object asked
	// for and not found is listed with no UID, so the page knows every
	// incarnation it has Events of is deleted.
	Objects []Object `json:"objects"`
	// Lookup says whether the cluster could be asked which objects exist;
	// where not (the user may not get them, or the server does not serve
	// the kind), Reason says why and the page marks as deleted only the
	// incarnations a newer one of the same name replaced.
	Lookup Availability `json:"lookup"`
	// Tree says what the owner tree covers and what it cannot know.
	Tree *Tree `json:"tree,omitempty"`
	// Records are the Events, each once at its newest version, oldest
	// first.
	Records []Record `json:"records"`
	// Dropped is how many older Events were left out past MaxRecords.
	Dropped int `json:"dropped"`
	// ResourceVersion is where api/watch continues history's feed, and
	// LiveResourceVersion the live Events.
	ResourceVersion     string `json:"resourceVersion"`
	LiveResourceVersion string `json:"liveResourceVersion"`
	// Followed says which objects -w follows (api/watch), and where not
	// all, why.
	Followed string `json:"followed"`
}

// Availability is whether a source answered, and if not why.
type Availability struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}

// Object is one object the cluster holds now, as its metadata says.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	// UID is empty for an object asked for and not found.
	UID string `json:"uid"`
	// Owner is the UID of the object above it in the tree.
	Owner string `json:"owner,omitempty"`
}

// Tree is the owner tree's extent.
type Tree struct {
	// Kinds are the kinds followed down from the object.
	Kinds []string `json:"kinds"`
	// Limit is the most objects folded in; Truncated says it was reached.
	Limit     int  `json:"limit"`
	Truncated bool `json:"truncated"`
	// Reason says why part of the tree could not be read, if it could not.
	Reason string `json:"reason,omitempty"`
}

// Record is one Event as the page draws it. Times are Unix milliseconds.
type Record struct {
	// ID names the Event across its versions; Version orders them.
	ID      string `json:"id"`
	Version int64  `json:"version"`
	// Name is the Event's name, Namespace its namespace.
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// The object the Event is about.
	Kind       string `json:"kind"`
	Object     string `json:"object"`
	UID        string `json:"uid"`
	APIVersion string `json:"apiVersion,omitempty"`

	Type     string `json:"type"`
	Reason   string `json:"reason"`
	Note     string `json:"note"`
	Reporter string `json:"reporter"`
	Action   string `json:"action,omitempty"`
	Count    int32  `json:"count"`
	First    int64  `json:"first"`
	Last     int64  `json:"last"`
	// Live is true while the Events API still serves it; Ended is when
	// history saw it leave (deleted or expired), 0 if it did not.
	Live  bool  `json:"live"`
	Ended int64 `json:"ended,omitempty"`
}

// NewRecord is the page's view of a timeline record.
func NewRecord(r *historyv1alpha1.EventRecord) Record {
	e := &r.Event
	out := Record{
		ID:         timeline.Key(r),
		Version:    timeline.ResourceVersion(r),
		Name:       e.Name,
		Namespace:  r.Namespace,
		Kind:       e.Regarding.Kind,
		Object:     e.Regarding.Name,
		UID:        string(e.Regarding.UID),
		APIVersion: e.Regarding.APIVersion,
		Type:       e.Type,
		Reason:     e.Reason,
		Note:       e.Note,
		Reporter:   timeline.Reporter(e),
		Action:     e.Action,
		Count:      timeline.Count(e),
		First:      millis(timeline.FirstSeen(e)),
		Last:       millis(r.LastSeen.Time),
		Live:       r.Live,
	}
	if r.DeletedAt != nil {
		out.Ended = millis(r.DeletedAt.Time)
	}
	if out.First > out.Last {
		// A recorder's clock may put firstTimestamp after the last
		// observation; the bar then is the one instant.
		out.First = out.Last
	}
	return out
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
