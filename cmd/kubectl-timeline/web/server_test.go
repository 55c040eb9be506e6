package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
)

// refusingBackend answers every story and count with the cluster's 403,
// as a user who may not list Events gets it.
type refusingBackend struct{}

func (refusingBackend) Story(context.Context, Query) (*Story, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New(`User "u" cannot list resource "events"`))
}

func (refusingBackend) Counts(context.Context, CountsQuery) (*Counts, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{Group: "history.eventapiserver.io", Resource: "eventrecords"}, "", errors.New(`User "u" cannot list resource "eventrecords"`))
}

func (refusingBackend) Objects(context.Context, ObjectsQuery) (*Objects, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{Group: "history.eventapiserver.io", Resource: "eventrecords"}, "", errors.New(`User "u" cannot list resource "eventrecords"`))
}

func (refusingBackend) Clusters(context.Context, Scope, time.Time) (*Clusters, error) {
	return nil, errors.New("not reached")
}

func (refusingBackend) Follow(context.Context, Follow, func(Record) error) error {
	return errors.New("not reached")
}

// TestServerGuard: every path needs the token and a loopback Host, and
// every answer, refusals included, carries the headers that keep the
// token and the page to themselves.
func TestServerGuard(t *testing.T) {
	s, err := Listen(0, refusingBackend{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.listener.Close()
	if !strings.HasPrefix(s.listener.Addr().String(), "127.0.0.1:") {
		t.Fatalf("listening on %s", s.listener.Addr())
	}
	host := s.listener.Addr().String()
	port := strings.TrimPrefix(host, "127.0.0.1:")
	tests := []struct {
		name, host, path string
		code             int
		contentType      string
	}{
		{"the page", host, "/" + s.token + "/", http.StatusOK, "text/html; charset=utf-8"},
		{"a module", host, "/" + s.token + "/app.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"as localhost", "localhost:" + port, "/" + s.token + "/style.css", http.StatusOK, "text/css; charset=utf-8"},
		{"an unknown file", host, "/" + s.token + "/nope.js", http.StatusNotFound, ""},
		{"out of the assets", host, "/" + s.token + "/../server.go", http.StatusNotFound, ""},
		{"the cluster's 403 passes through", host, "/" + s.token + "/api/story?kind=Pod&name=web-0&namespace=shop", http.StatusForbidden, "application/json"},
		{"a bad query is a 400", host, "/" + s.token + "/api/story?kind=Pod&name=web-0", http.StatusBadRequest, "application/json"},
		{"an owned uid that is no uid is a 400", host, "/" + s.token + "/api/watch?kind=Pod&name=web-0&namespace=shop&owned=a),reason=x", http.StatusBadRequest, "application/json"},
		{"the cluster's 403 to a count passes through", host, "/" + s.token + "/api/counts?namespace=shop&since=1700000000000&bucket=3600", http.StatusForbidden, "application/json"},
		{"a count without its bucket is a 400", host, "/" + s.token + "/api/counts?namespace=shop&since=1700000000000", http.StatusBadRequest, "application/json"},
		{"a count by an unknown field is a 400", host, "/" + s.token + "/api/counts?namespace=shop&since=1700000000000&bucket=60&by=note", http.StatusBadRequest, "application/json"},
		{"a cluster that is no DNS label is a 400", host, "/" + s.token + "/api/objects?namespace=shop&since=1&value=x&cluster=a,reason=b", http.StatusBadRequest, "application/json"},
		{"the cluster's 403 to a drill-down passes through", host, "/" + s.token + "/api/objects?allNamespaces=true&since=1&value=BackOff", http.StatusForbidden, "application/json"},
		{"no token", host, "/", http.StatusForbidden, ""},
		{"no token, an asset", host, "/app.js", http.StatusForbidden, ""},
		{"the token without its slash", host, "/" + s.token, http.StatusForbidden, ""},
		{"a longer token", host, "/" + s.token + "a/", http.StatusForbidden, ""},
		{"another host", "rebound.example:" + port, "/" + s.token + "/", http.StatusForbidden, ""},
		{"another port", "127.0.0.1:1", "/" + s.token + "/", http.StatusForbidden, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://"+tc.host+tc.path, nil)
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Errorf("code %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if tc.contentType != "" && rec.Header().Get("Content-Type") != tc.contentType {
				t.Errorf("Content-Type %q, want %q", rec.Header().Get("Content-Type"), tc.contentType)
			}
			for k, want := range map[string]string{"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s %q, want %q", k, got, want)
				}
			}
			if csp := rec.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'; script-src 'self';") {
				t.Errorf("CSP %q", csp)
			}
		})
	}
	post := httptest.NewRequest(http.MethodPost, "http://"+host+"/"+s.token+"/api/story", nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, post)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", rec.Code)
	}
	if _, err := Listen(70000, refusingBackend{}, Config{}); err == nil {
		t.Error("port 70000 was accepted")
	}
}

func TestParseQuery(t *testing.T) {
	tests := []struct {
		query   string
		want    Query
		wantErr string
	}{
		{query: "kind=Pod&name=web-0&namespace=shop&tree=true", want: Query{Kind: "Pod", Name: "web-0", Namespace: "shop", Tree: true}},
		{query: "kind=Deployment&group=apps&name=web&allNamespaces=true", want: Query{Group: "apps", Kind: "Deployment", Name: "web", All: true}},
		{query: "kind=Pod&namespace=shop", wantErr: "kind and name are required"},
		{query: "kind=Pod&name=web-0", wantErr: "namespace is required"},
		{query: "kind=Pod&name=web-0&namespace=shop&since=x", wantErr: "since must be Unix milliseconds"},
		{query: "kind=Pod&name=web-0&namespace=shop&types=Error", wantErr: "valid types are Normal or Warning"},
		{query: "kind=Pod&name=" + strings.Repeat("x", 300) + "&namespace=shop", wantErr: "longer than 253 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			got, err := parseQuery(httptest.NewRequest(http.MethodGet, "/?"+tc.query, nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Group != tc.want.Group || got.Kind != tc.want.Kind || got.Name != tc.want.Name ||
				got.Namespace != tc.want.Namespace || got.All != tc.want.All || got.Tree != tc.want.Tree {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	q, err := parseQuery(httptest.NewRequest(http.MethodGet, "/?kind=Pod&name=a&namespace=b&since=1700000000000&types=Warning", nil))
	if err != nil || !q.Filter.Since.Equal(time.UnixMilli(1700000000000)) || len(q.Filter.Types) != 1 || q.Filter.Types[0] != "Warning" {
		t.Errorf("since and types: %+v, %v", q.Filter, err)
	}
}

// TestNewRecord: a series is drawn from its first to its last observation
// with its count; an ended Event says when.
func TestNewRecord(t *testing.T) {
	first := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	last := first.Add(time.Hour)
	ended := metav1.NewTime(last.Add(time.Minute))
	r := NewRecord(&historyv1alpha1.EventRecord{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0.b.12", Namespace: "shop"},
		Event: eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0.b", UID: "event-uid", ResourceVersion: "12"},
			Regarding:  corev1.ObjectReference{Kind: "Pod", Name: "web-0", UID: "pod-uid", APIVersion: "v1"},
			Type:       "Warning", Reason: "BackOff", Note: "Back-off", ReportingController: "kubelet",
			EventTime: metav1.NewMicroTime(first), Series: &eventsv1.EventSeries{Count: 14, LastObservedTime: metav1.NewMicroTime(last)},
		},
		LastSeen: metav1.NewTime(last), DeletedAt: &ended,
	})
	want := Record{
		ID: "event-uid", Version: 12, Name: "web-0.b", Namespace: "shop", Kind: "Pod", Object: "web-0", UID: "pod-uid", APIVersion: "v1",
		Type: "Warning", Reason: "BackOff", Note: "Back-off", Reporter: "kubelet", Count: 14,
		First: first.UnixMilli(), Last: last.UnixMilli(), Ended: ended.UnixMilli(),
	}
	if r != want {
		t.Errorf("got  %+v\nwant %+v", r, want)
	}
}

func TestParseCountsQuery(t *testing.T) {
	tests := []struct {
		query   string
		wantErr string
	}{
		{query: "namespace=shop&since=1700000000000&bucket=3600"},
		{query: "allNamespaces=true&since=1700000000000&bucket=60&by=type&top=20&cluster=eu-west-1"},
		{query: "since=1700000000000&bucket=3600", wantErr: "namespace is required"},
		{query: "namespace=Shop&since=1700000000000&bucket=3600", wantErr: `namespace "Shop"`},
		{query: "namespace=shop&bucket=3600", wantErr: "since is required"},
		{query: "namespace=shop&since=-5&bucket=3600", wantErr: "since must be Unix milliseconds"},
		{query: "namespace=shop&since=1700000000000&bucket=0", wantErr: "bucket must be a whole number of seconds"},
		{query: "namespace=shop&since=1700000000000&bucket=60&by=note", wantErr: "by must be reason, type or cluster"},
		{query: "namespace=shop&since=1700000000000&bucket=60&cluster=a,b", wantErr: `cluster "a,b"`},
		{query: "namespace=shop&since=1700000000000&bucket=60&top=x", wantErr: "top must be a number"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			q, err := parseCountsQuery(httptest.NewRequest(http.MethodGet, "/?"+tc.query, nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q.Since.UnixMilli() != 1700000000000 || q.Bucket < time.Minute || q.Top == 0 || q.By == "" {
				t.Errorf("parsed %+v", q)
			}
		})
	}
	q, err := parseObjectsQuery(httptest.NewRequest(http.MethodGet, "/?namespace=shop&since=1&until=2&other=true&except=BackOff&except=Failed", nil))
	if err != nil || !q.Other || len(q.Except) != 2 || q.By != "reason" || q.Until.UnixMilli() != 2 {
		t.Errorf("the drill-down into other: %+v, %v", q, err)
	}
	many := "/?namespace=shop&since=1&other=true" + strings.Repeat("&except=x", maxExcept+1)
	if _, err := parseObjectsQuery(httptest.NewRequest(http.MethodGet, many, nil)); err == nil {
		t.Error("more excepted values than a count's top were taken")
	}
}
