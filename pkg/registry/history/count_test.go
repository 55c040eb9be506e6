package history_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
	registry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

// TestCount: a count reads its spec as a list of eventrecords reads its
// field selector, answers every bucket of the window, and refuses with 422
// at the field what it cannot count exactly or would cost past its limits;
// a requester the authorizer denies gets 403 before the spec is read, and a
// count past its timeout kube-apiserver's 504.
func TestCount(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Each Event a minute past a whole number of hours before now, so that
	// since=3h keeps ev-0..ev-2 whatever the minute the test runs in: an
	// hour-aligned now left ev-3 inside the window in an hour's first minute.
	now := time.Now()
	reasons := []string{"BackOff", "BackOff", "Started", "BackOff", "Pulled"}
	for i, reason := range reasons {
		event := &core.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("ev-", i), UID: types.UID(fmt.Sprint("uid-", i))},
			Reason:     reason, Type: "Warning", Action: "Restart", Message: fmt.Sprintf("Event %d of %s: x509 expired", i, reason),
			LastTimestamp: metav1.NewTime(now.Add(-time.Duration(i) * time.Hour).Add(-time.Minute)),
		}
		if err := s.Write(context.Background(), history.Batch{Versions: []history.Version{versionOf(t, event, int64(i+1), now)}}); err != nil {
			t.Fatal(err)
		}
	}
	allow := authorizerfactory.NewAlwaysAllowAuthorizer()
	ctx := genericapirequest.WithUser(genericapirequest.WithNamespace(context.Background(), "ns"), &user.DefaultInfo{Name: "alice"})
	count := func(rest *registry.CountREST, spec historyapi.EventRecordCountSpec) (historyapi.EventRecordCountStatus, error) {
		obj, err := rest.Create(ctx, &historyapi.EventRecordCount{Spec: spec}, nil, &metav1.CreateOptions{})
		if err != nil {
			return historyapi.EventRecordCountStatus{}, err
		}
		return obj.(*historyapi.EventRecordCount).Status, nil
	}
	rest := registry.NewCountREST(s, nil, allow, apiserver.Scheme, false, registry.CountConfig{MaxWindow: 7 * 24 * time.Hour})

	status, err := count(rest, historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "type=Warning,since=3h"})
	if err != nil {
		t.Fatal(err)
	}
	// since=3h keeps ev-0..ev-2, one an hour; the window touches 4 hourly buckets.
	var got []string
	for _, g := range status.Groups {
		got = append(got, fmt.Sprintf("%s=%d", g.Values[0], g.Total))
	}
	if fmt.Sprint(got) != "[BackOff=2 Started=1]" || status.Total != 3 || status.Other != 0 || len(status.Buckets) != 4 {
		t.Errorf("groups %v, total %d, other %d, %d buckets", got, status.Total, status.Other, len(status.Buckets))
	}
	for i, b := range status.Buckets {
		if b.Start.Minute() != 0 || len(b.Counts) != 2 || i > 0 && !b.Start.After(status.Buckets[i-1].Start.Time) {
			t.Errorf("bucket %d: %v %v", i, b.Start, b.Counts)
		}
	}
	status, err = count(rest, historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, Top: 1, FieldSelector: "since=24h"})
	if err != nil || status.Total != 5 || status.Other != 2 || len(status.Groups) != 1 {
		t.Errorf("top 1: %+v, %v", status, err)
	}
	// The set forms and a text search, as a list takes them.
	for selector, want := range map[string]string{
		"reason in (Started,Pulled),since=24h":         "[Pulled=1 Started=1]",
		"reason notin (Started,Pulled),since=24h":      "[BackOff=3]",
		"note.contains=OF BACKOFF,since=24h":           "[BackOff=3]",
		"note.contains=x509,reason!=BackOff,since=24h": "[Pulled=1 Started=1]",
	} {
		status, err := count(rest, historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: selector})
		var got []string
		for _, g := range status.Groups {
			got = append(got, fmt.Sprintf("%s=%d", g.Values[0], g.Total))
		}
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("%s: %v (%v), want %s", selector, got, err, want)
		}
	}

	for _, tc := range []struct {
		name string
		spec historyapi.EventRecordCountSpec
		want string
	}{
		{"no groupBy", historyapi.EventRecordCountSpec{}, "spec.groupBy: Invalid value"},
		{"three groupBy", historyapi.EventRecordCountSpec{GroupBy: []string{"reason", "type", "regarding.kind"}}, "name one or two fields"},
		{"unknown groupBy", historyapi.EventRecordCountSpec{GroupBy: []string{"note"}}, `spec.groupBy[0]: Unsupported value: "note"`},
		{"duplicate groupBy", historyapi.EventRecordCountSpec{GroupBy: []string{"reason", "reason"}}, "spec.groupBy[1]: Duplicate value"},
		{"malformed selector", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "reason"}, "spec.fieldSelector: Invalid value"},
		{"unknown label", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "color=red"}, "field label not supported: color"},
		{"label without a column", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "action=Restart"}, "a count reads only the fields history keeps in columns"},
		{"added column", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "note=x"}, "note: versions stored before"},
		{"search term too short", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "note.contains=x5"}, "spec.fieldSelector: Invalid value"},
		{"set of a label without one", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "note.contains in (x509,abcd)"}, "spec.fieldSelector: Invalid value"},
		{"window too long", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "since=200h"}, "more than the 168h0m0s a count may span"},
		{"since after until", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "since=1h,until=2h"}, "must be before until"},
		{"too many buckets", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, BucketSize: metav1.Duration{Duration: time.Second}}, "more than 2000: choose a larger bucketSize"},
		{"bucket too short", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, BucketSize: metav1.Duration{Duration: time.Millisecond}}, "must be at least 1s"},
		{"top too large", historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}, Top: 101}, "spec.top: Invalid value: 101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := count(rest, tc.spec)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want 422 saying %q", err, tc.want)
			}
		})
	}

	denied := registry.NewCountREST(s, nil, authorizerfactory.NewAlwaysDenyAuthorizer(), apiserver.Scheme, false, registry.CountConfig{})
	// Even a malformed spec gets only the 403.
	_, err = count(denied, historyapi.EventRecordCountSpec{FieldSelector: "reason"})
	want := `eventrecords.history.eventapiserver.io is forbidden: User "alice" cannot list resource "eventrecords" in API group "history.eventapiserver.io" in the namespace "ns"`
	if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("denied: %v, want 403 %q", err, want)
	}

	slow := registry.NewCountREST(s, nil, allow, apiserver.Scheme, false, registry.CountConfig{Timeout: time.Nanosecond})
	_, err = count(slow, historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}})
	if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != http.StatusGatewayTimeout || !apierrors.IsTimeout(err) {
		t.Errorf("past the timeout: %v, want 504 Timeout", err)
	}

	off := registry.NewCountREST(nil, nil, allow, apiserver.Scheme, false, registry.CountConfig{})
	if _, err := count(off, historyapi.EventRecordCountSpec{GroupBy: []string{"reason"}}); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "--history") {
		t.Errorf("history off: %v, want Off's 404", err)
	}
}
