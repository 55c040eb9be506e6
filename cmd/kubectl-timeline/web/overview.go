package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Scope is where the overview looks: one namespace or all, and on a fleet's
// hub one cluster or (empty) every cluster the user may read.
type Scope struct {
	Namespace string `json:"namespace"`
	All       bool   `json:"allNamespaces"`
	Cluster   string `json:"cluster,omitempty"`
}

// CountsQuery is one chart: the server's counts (eventrecordcounts) of the
// Event versions last seen in [Since, Until), by one field, per Bucket,
// those whose note holds Search where it is set (note.contains, which
// counts no version stored before history kept the note).
type CountsQuery struct {
	Scope
	// By is reason, type or cluster.
	By     string
	Search string
	// Until zero is open: the window ends now, and versions a recorder's
	// clock put later are counted in later buckets, as the API counts them.
	Since, Until time.Time
	Bucket       time.Duration
	Top          int32
}

// Counts is the server's answer to a CountsQuery, times in Unix
// milliseconds.
type Counts struct {
	// History says whether the counts API answered; where history is not
	// installed Reason says so and nothing else is set.
	History Availability `json:"history"`
	// Kind and FieldSelector are what was asked of the server:
	// EventRecordCount or ClusterEventRecordCount, and its
	// spec.fieldSelector (the page shows them; a test repeats them).
	Kind          string `json:"kind,omitempty"`
	FieldSelector string `json:"fieldSelector,omitempty"`
	By            string `json:"by,omitempty"`
	Top           int32  `json:"top,omitempty"`
	Bucket        int64  `json:"bucket,omitempty"`

	Since   int64         `json:"since"`
	Until   int64         `json:"until"`
	Total   int64         `json:"total"`
	Other   int64         `json:"other"`
	Groups  []CountGroup  `json:"groups"`
	Buckets []CountBucket `json:"buckets"`
}

// CountGroup is one group's value and its versions in the window.
type CountGroup struct {
	Value string `json:"value"`
	Total int64  `json:"total"`
}

// CountBucket is one bucket's count per group, in Counts.Groups' order,
// and Other, the rest of its versions: the API answers "other" for the
// whole window only, so the backend asks a second count, by type, for each
// bucket's total.
type CountBucket struct {
	Start  int64   `json:"start"`
	Counts []int64 `json:"counts"`
	Other  int64   `json:"other"`
}

// ObjectsQuery is a drill-down: the objects behind one segment of a chart
// (a group's value, or "other": none of Except) in [Since, Until).
type ObjectsQuery struct {
	Scope
	By    string
	Value string
	// Any lists every group's records (a search's objects); Other those of
	// none of Except.
	Any    bool
	Other  bool
	Except []string
	Since  time.Time
	Until  time.Time
	Search string
	// Live lists the live Events API's Events of the scope instead (no
	// window, no group): where history is not installed.
	Live bool
}

// Objects are the objects an ObjectsQuery's records are about, the most
// records first.
type Objects struct {
	FieldSelector string         `json:"fieldSelector"`
	Objects       []ObjectCounts `json:"objects"`
	// Records is how many records were read; Truncated says the read
	// stopped at MaxObjectRecords with more to read, so the counts are of
	// the newest part only; ObjectsTruncated that past MaxObjects objects
	// were left out.
	Records          int  `json:"records"`
	Truncated        bool `json:"truncated"`
	ObjectsTruncated bool `json:"objectsTruncated"`
}

// ObjectCounts is one object (by kind and name, every incarnation) and its
// records in the window.
type ObjectCounts struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Cluster    string `json:"cluster,omitempty"`
	// Records counts the versions, as the counts API does; Warnings how
	// many of them are Warnings; UIDs the incarnations seen.
	Records  int   `json:"records"`
	Warnings int   `json:"warnings"`
	UIDs     int   `json:"uids"`
	Last     int64 `json:"last"`
}

// Clusters are the clusters the user may read records of, from counts by
// cluster, or why they cannot be listed.
type Clusters struct {
	Available bool     `json:"available"`
	Reason    string   `json:"reason,omitempty"`
	Names     []string `json:"names"`
}

const (
	// MaxObjectRecords bounds the records one drill-down reads.
	MaxObjectRecords = 5000
	// MaxObjects bounds the objects one drill-down answers.
	MaxObjects = 200
	// maxExcept bounds the values "other" excludes: the counts API's
	// largest top.
	maxExcept = 100
	// defaultTop is the chart's groups before "other": more colours
	// than this are not told apart.
	defaultTop = 8
)

// byFields are the fields a chart groups by, as eventrecords' field
// selectors and the counts API spell them.
var byFields = map[string]bool{"reason": true, "type": true, "cluster": true}

func parseScope(v url.Values) (Scope, error) {
	s := Scope{Namespace: v.Get("namespace"), All: v.Get("allNamespaces") == "true", Cluster: v.Get("cluster")}
	if !s.All {
		if s.Namespace == "" {
			return s, errors.New("namespace is required unless allNamespaces=true")
		}
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			return s, fmt.Errorf("namespace %q: %s", s.Namespace, errs[0])
		}
	}
	if s.Cluster != "" {
		if errs := validation.IsDNS1123Label(s.Cluster); len(errs) > 0 {
			return s, fmt.Errorf("cluster %q: %s", s.Cluster, errs[0])
		}
	}
	return s, nil
}

func parseMillis(v url.Values, name string, required bool) (time.Time, error) {
	s := v.Get(name)
	if s == "" {
		if required {
			return time.Time{}, fmt.Errorf("%s is required", name)
		}
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 0 {
		return time.Time{}, fmt.Errorf("%s must be Unix milliseconds, got %q", name, s)
	}
	return time.UnixMilli(ms), nil
}

func parseBy(v url.Values) (string, error) {
	by := v.Get("by")
	if by == "" {
		by = "reason"
	}
	if !byFields[by] {
		return "", fmt.Errorf("by must be reason, type or cluster, got %q", by)
	}
	return by, nil
}

func parseCountsQuery(r *http.Request) (CountsQuery, error) {
	v := r.URL.Query()
	var q CountsQuery
	var err error
	if q.Scope, err = parseScope(v); err != nil {
		return q, err
	}
	if q.By, err = parseBy(v); err != nil {
		return q, err
	}
	if q.Since, err = parseMillis(v, "since", true); err != nil {
		return q, err
	}
	if q.Until, err = parseMillis(v, "until", false); err != nil {
		return q, err
	}
	seconds, err := strconv.ParseInt(v.Get("bucket"), 10, 64)
	if err != nil || seconds < 1 {
		return q, fmt.Errorf("bucket must be a whole number of seconds, got %q", v.Get("bucket"))
	}
	q.Bucket = time.Duration(seconds) * time.Second
	// The API checks the term (its 400 names what is wrong).
	q.Search = v.Get("search")
	q.Top = defaultTop
	if top := v.Get("top"); top != "" {
		n, err := strconv.ParseInt(top, 10, 32)
		if err != nil {
			return q, fmt.Errorf("top must be a number, got %q", top)
		}
		// The API refuses what is out of its range, in its own words.
		q.Top = int32(n)
	}
	return q, nil
}

func parseObjectsQuery(r *http.Request) (ObjectsQuery, error) {
	v := r.URL.Query()
	var q ObjectsQuery
	var err error
	if q.Scope, err = parseScope(v); err != nil {
		return q, err
	}
	if q.Live = v.Get("live") == "true"; q.Live {
		return q, nil
	}
	if q.By, err = parseBy(v); err != nil {
		return q, err
	}
	q.Value, q.Any, q.Other, q.Except = v.Get("value"), v.Get("any") == "true", v.Get("other") == "true", v["except"]
	if len(q.Except) > maxExcept {
		return q, fmt.Errorf("at most %d values are excepted, got %d", maxExcept, len(q.Except))
	}
	if q.Since, err = parseMillis(v, "since", true); err != nil {
		return q, err
	}
	if q.Until, err = parseMillis(v, "until", false); err != nil {
		return q, err
	}
	// The API checks the term (its 400 names what is wrong).
	q.Search = v.Get("search")
	return q, nil
}

func (s *Server) counts(w http.ResponseWriter, r *http.Request) {
	q, err := parseCountsQuery(r)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	counts, err := s.backend.Counts(r.Context(), q)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, counts)
}

func (s *Server) objects(w http.ResponseWriter, r *http.Request) {
	q, err := parseObjectsQuery(r)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	objects, err := s.backend.Objects(r.Context(), q)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, objects)
}

func (s *Server) clusters(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	scope, err := parseScope(v)
	if err == nil && scope.Cluster != "" {
		err = errors.New("the clusters are listed across clusters: no cluster")
	}
	var since time.Time
	if err == nil {
		since, err = parseMillis(v, "since", true)
	}
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	clusters, err := s.backend.Clusters(r.Context(), scope, since)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, clusters)
}
