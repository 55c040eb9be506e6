package history_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	userinfo "k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
	registry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

// TestClusterSelector: eventrecords show the cluster of each record, the
// server's own (stored as "") by its name, and take cluster=, cluster!=,
// cluster in (...) and notin, in lists and watches; the Events APIs refuse
// the label, as kube-apiserver refuses a label it does not know.
func TestClusterSelector(t *testing.T) {
	label, value, err := apiserver.Scheme.ConvertFieldLabel(historyv1alpha1.SchemeGroupVersion.WithKind("EventRecord"), "cluster", "x")
	if err != nil || label != "cluster" || value != "x" {
		t.Fatalf("eventrecords' cluster label: %q=%q, %v", label, value, err)
	}
	if _, _, err := apiserver.Scheme.ConvertFieldLabel(corev1.SchemeGroupVersion.WithKind("Event"), "cluster", "x"); err == nil {
		t.Fatal("core/v1 Events accept the cluster label; kube-apiserver does not")
	}
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for i, cluster := range []string{"", "b", "c", "b"} {
		event := &core.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("ev-", i), UID: types.UID(fmt.Sprint("uid-", i))},
			Reason:     "BackOff", Type: "Warning", LastTimestamp: metav1.NewTime(now.Add(time.Duration(i) * time.Second)),
		}
		v := versionOf(t, event, int64(i+1), now)
		v.Cluster = cluster
		if err := s.Write(context.Background(), history.Batch{Versions: []history.Version{v}}); err != nil {
			t.Fatal(err)
		}
	}
	rest := registry.NewREST(s, apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion),
		registry.FeedConfig{PollInterval: 10 * time.Millisecond, Cluster: "a"})
	ctx := genericapirequest.WithNamespace(context.Background(), "ns")
	for _, tc := range []struct {
		selector string
		want     []string
	}{
		{"cluster=a", []string{"ev-0.1@a"}},
		{"cluster=b", []string{"ev-1.2@b", "ev-3.4@b"}},
		{"cluster=b,reason=BackOff", []string{"ev-1.2@b", "ev-3.4@b"}},
		{"cluster!=b", []string{"ev-0.1@a", "ev-2.3@c"}},
		{"cluster in (a,c)", []string{"ev-0.1@a", "ev-2.3@c"}},
		{"cluster notin (a,b)", []string{"ev-2.3@c"}},
		{"cluster=d", nil},
		// The store's spelling of the own cluster is no name.
		{"cluster=", nil},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			selector := internalSelector(t, tc.selector)
			obj, err := rest.List(ctx, &metainternalversion.ListOptions{FieldSelector: selector})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range obj.(*historyapi.EventRecordList).Items {
				got = append(got, r.Name+"@"+r.Cluster)
			}
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("list: %v, want %v", got, tc.want)
			}
			w, err := rest.Watch(ctx, &metainternalversion.ListOptions{FieldSelector: selector, ResourceVersion: "1"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			got = nil
			for range tc.want {
				ev := next(t, w)
				if ev.Type != watch.Added {
					t.Fatalf("watch: %s", ev.Type)
				}
				r := ev.Object.(*historyapi.EventRecord)
				got = append(got, r.Name+"@"+r.Cluster)
			}
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("watch: %v, want %v", got, tc.want)
			}
		})
	}
	obj, err := rest.Get(ctx, "ev-0.1", nil)
	if err != nil || obj.(*historyapi.EventRecord).Cluster != "a" {
		t.Fatalf("get: %v (%v), want cluster a", obj, err)
	}
}

// internalSelector is a field selector of eventrecords as the handler gives
// it to the registry: a set requirement (`cluster in (a,c)`, the only term)
// encoded as fieldselectors encodes it, other terms converted.
func internalSelector(t *testing.T, selector string) fields.Selector {
	t.Helper()
	for _, op := range []string{" notin (", " in ("} {
		if label, values, ok := strings.Cut(selector, op); ok {
			return fieldselectors.Selector([]fieldselectors.Requirement{{
				Field: label, Values: strings.Split(strings.TrimSuffix(values, ")"), ","), Not: op == " notin (", Set: true}})
		}
	}
	parsed, err := fields.ParseSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	converted, err := parsed.Transform(func(label, value string) (string, string, error) {
		return apiserver.Scheme.ConvertFieldLabel(historyv1alpha1.SchemeGroupVersion.WithKind("EventRecord"), label, value)
	})
	if err != nil {
		t.Fatal(err)
	}
	return converted
}

// TestClusterCounts: a count names the server's own cluster as its records
// do, groups by cluster, and on a fleet's hub reads only the clusters its
// requester may read, as a list does.
func TestClusterCounts(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for i, cluster := range []string{"", "b", "c", "b"} {
		event := &core.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("ev-", i), UID: types.UID(fmt.Sprint("uid-", i))},
			Reason:     "BackOff", Type: "Warning", LastTimestamp: metav1.NewTime(now.Add(-time.Duration(i) * time.Second)),
		}
		v := versionOf(t, event, int64(i+1), now)
		v.Cluster = cluster
		if err := s.Write(context.Background(), history.Batch{Versions: []history.Version{v}}); err != nil {
			t.Fatal(err)
		}
	}
	// The hub's authorizer: bob reads cluster b's records and no other.
	clusters := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "admin" || a.GetName() == "b" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	rest := registry.NewREST(s, apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion),
		registry.FeedConfig{PollInterval: 10 * time.Millisecond, Cluster: "a", Clusters: clusters})
	counts := registry.NewCountREST(s, rest, authorizerfactory.NewAlwaysAllowAuthorizer(), apiserver.Scheme, false, registry.CountConfig{})
	count := func(user, selector string, groupBy ...string) (*historyapi.EventRecordCount, error) {
		ctx := genericapirequest.WithUser(genericapirequest.WithNamespace(context.Background(), "ns"), &userinfo.DefaultInfo{Name: user})
		obj, err := counts.Create(ctx, &historyapi.EventRecordCount{Spec: historyapi.EventRecordCountSpec{
			FieldSelector: selector, GroupBy: groupBy}}, nil, &metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*historyapi.EventRecordCount), nil
	}

	c, err := count("admin", "since=1h", "cluster")
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, g := range c.Status.Groups {
		groups = append(groups, fmt.Sprint(g.Values[0], "=", g.Total))
	}
	if want := "[b=2 a=1 c=1]"; fmt.Sprint(groups) != want {
		t.Errorf("admin's count by cluster: %v, want %s", groups, want)
	}
	if c, err := count("admin", "since=1h,cluster=a", "reason"); err != nil || c.Status.Total != 1 {
		t.Errorf("admin's count of cluster=a (the server's own, stored as \"\"): %+v, %v; want 1", c, err)
	}
	if c, err := count("bob", "since=1h,cluster=b", "reason"); err != nil || c.Status.Total != 2 {
		t.Errorf("bob's count of cluster=b: %+v, %v; want 2", c, err)
	}
	for _, selector := range []string{"since=1h", "since=1h,cluster=c", "since=1h,cluster!=c"} {
		if _, err := count("bob", selector, "reason"); !apierrors.IsForbidden(err) {
			t.Errorf("bob's count of %q: %v, want 403", selector, err)
		}
	}
}
