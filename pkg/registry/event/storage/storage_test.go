package storage

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	etcd3testing "k8s.io/apiserver/pkg/storage/etcd3/testing"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/pkg/watchresume"
)

// TestWithSelectedNamespace pins when a list across namespaces is read as a
// list of one: only for a valid namespace name, as the Store's
// ListPredicate narrows. An invalid one used to become the storage key and
// answer 500.
func TestWithSelectedNamespace(t *testing.T) {
	for _, tc := range []struct {
		name, requestNamespace, selector, want string
	}{
		{name: "valid name narrows", selector: "metadata.namespace=kube-system", want: "kube-system"},
		{name: "dot-dot does not narrow", selector: "metadata.namespace=..", want: ""},
		{name: "slash does not narrow", selector: "metadata.namespace=a/b", want: ""},
		{name: "upper case does not narrow", selector: "metadata.namespace=Default", want: ""},
		{name: "too long does not narrow", selector: "metadata.namespace=" + longName, want: ""},
		{name: "inequality does not narrow", selector: "metadata.namespace!=default", want: ""},
		{name: "request namespace wins", requestNamespace: "default", selector: "metadata.namespace=..", want: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := genericapirequest.WithNamespace(context.Background(), tc.requestNamespace)
			selector, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			ctx = withSelectedNamespace(ctx, &metainternalversion.ListOptions{FieldSelector: selector})
			if got, _ := genericapirequest.NamespaceFrom(ctx); got != tc.want {
				t.Errorf("namespace %q, want %q", got, tc.want)
			}
		})
	}
}

// longName is one character over a DNS label's 63.
const longName = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// newTestREST builds the Event store over a real etcd (k8s.io/apiserver's
// etcd3 testing server, in process), through the storage stack pkg/apiserver
// installs without the health gate: with cached, the watch cache with its
// indexes and watch resume; without, plain etcd3. Both with the TTL router
// of rules.
func newTestREST(t *testing.T, rules *ttl.Rules, cached bool) (*REST, *etcd3testing.EtcdTestServer, string) {
	t.Helper()
	server, storageConfig := etcd3testing.NewUnsecuredEtcd3TestClientServer(t)
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	eventsinstall.Install(scheme)
	// As storagebackend.NewDefaultConfig sets it; the cacher refuses less.
	storageConfig.EventsHistoryWindow = storagebackend.DefaultEventsHistoryWindow
	storageConfig.Codec = serializer.NewCodecFactory(scheme).LegacyCodec(corev1.SchemeGroupVersion)
	options := generic.RESTOptions{
		StorageConfig:           storageConfig.ForResource(core.Resource("events")),
		Decorator:               generic.UndecoratedStorage,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          "events",
	}
	if cached {
		options.Decorator = genericregistry.StorageWithCacher()
	}
	getter := watchresume.NewRESTOptionsGetter(options, rules.NewRawStorage, func(s storage.Interface) storage.Interface { return s })
	r, err := NewREST(scheme, getter, rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Store.DestroyFunc)
	return r, server, storageConfig.Prefix
}

// coreRequest is a request through core/v1 in namespace ("" for all).
func coreRequest(namespace string) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, APIGroup: "", APIVersion: "v1", Namespace: namespace, Resource: "events",
	})
}

// eventIn is what client-go's tools/record writes through core/v1.
func eventIn(namespace, name, eventType string) *core.Event {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return &core.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: namespace},
		InvolvedObject: core.ObjectReference{Kind: "Pod", Namespace: namespace, Name: "pod"},
		Reason:         "Started",
		Message:        "Started container",
		Source:         core.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
		Type:           eventType,
	}
}

var storeModes = []struct {
	name   string
	cached bool
}{{name: "etcd3", cached: false}, {name: "watch cache", cached: true}}

// TestStoreCRUD: create, get, list, update (a recorder's repeat) and delete
// through the store, as kube-apiserver's Event storage test does.
func TestStoreCRUD(t *testing.T) {
	rules, err := ttl.Parse(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) {
			r, _, _ := newTestREST(t, rules, mode.cached)
			ctx := coreRequest("default")
			if _, err := r.Create(ctx, eventIn("default", "e1", corev1.EventTypeNormal), rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := r.Get(ctx, "e1", &metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if e := got.(*core.Event); e.Reason != "Started" || e.ResourceVersion == "" {
				t.Fatalf("got %#v", e)
			}

			// A repeat: PUT without a resourceVersion, which Events allow.
			repeat := eventIn("default", "e1", corev1.EventTypeNormal)
			repeat.Count = 2
			updated, created, err := r.Update(ctx, "e1", rest.DefaultUpdatedObjectInfo(repeat), rest.ValidateAllObjectFunc,
				rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			if err != nil || created || updated.(*core.Event).Count != 2 {
				t.Fatalf("update: created %v, %v, %#v", created, err, updated)
			}
			// A PUT of a missing Event creates it.
			if _, created, err := r.Update(ctx, "e2", rest.DefaultUpdatedObjectInfo(eventIn("default", "e2", corev1.EventTypeNormal)),
				rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil || !created {
				t.Fatalf("create on update: created %v, %v", created, err)
			}

			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				// ResourceVersion "0" is served by the watch cache when there is one.
				list, err := r.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
				if err != nil {
					return false, err
				}
				return len(list.(*core.EventList).Items) == 2, nil
			}); err != nil {
				t.Fatalf("listing both Events: %v", err)
			}

			if _, _, err := r.Delete(ctx, "e1", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Get(ctx, "e1", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("get after delete: %v, want NotFound", err)
			}
		})
	}
}

// TestStoreTTLLease: every write is attached to an etcd lease of the Event's
// TTL, the first --event-ttl-rule that matches or --event-ttl, as
// kube-apiserver's TTLFunc does with --event-ttl; zero means no lease.
func TestStoreTTLLease(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rules     []string
		def       time.Duration
		eventType string
		want      int64
	}{
		{name: "default TTL", def: time.Hour, eventType: corev1.EventTypeNormal, want: 3600},
		{name: "matching rule", rules: []string{"type=Warning:2h"}, def: time.Hour, eventType: corev1.EventTypeWarning, want: 7200},
		{name: "rule not matching", rules: []string{"type=Warning:2h"}, def: time.Hour, eventType: corev1.EventTypeNormal, want: 3600},
		{name: "zero keeps forever", eventType: corev1.EventTypeNormal, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := ttl.Parse(tc.rules, tc.def)
			if err != nil {
				t.Fatal(err)
			}
			r, server, prefix := newTestREST(t, rules, false)
			ctx := coreRequest("default")
			if _, err := r.Create(ctx, eventIn("default", "e", tc.eventType), rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			resp, err := server.V3Client.Client.Get(ctx, prefix+"/events/default/e")
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("reading the Event's key: %v %v", resp, err)
			}
			lease := resp.Kvs[0].Lease
			if tc.want == 0 {
				if lease != 0 {
					t.Fatalf("lease %x, want none", lease)
				}
				return
			}
			ttlResp, err := server.V3Client.TimeToLive(ctx, clientv3.LeaseID(lease))
			if err != nil {
				t.Fatal(err)
			}
			// The etcd3 store grants a reusable lease a little longer than
			// the TTL asked for (k8s.io/apiserver storage/etcd3 leaseManager).
			if ttlResp.GrantedTTL < tc.want || ttlResp.GrantedTTL > tc.want+tc.want/10+60 {
				t.Errorf("lease granted for %ds, want about %ds", ttlResp.GrantedTTL, tc.want)
			}
		})
	}
}

// TestListAllNamespacesPinnedToOnePages: a list across all namespaces whose
// field selector pins metadata.namespace pages through exactly that
// namespace's Events. k8s.io/apiserver v0.36.3 narrows only the first page
// to the namespace, so its continue token is read against the wrong prefix
// and items are lost or repeated; REST.List narrows every page.
func TestListAllNamespacesPinnedToOnePages(t *testing.T) {
	rules, err := ttl.Parse(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) {
			r, _, _ := newTestREST(t, rules, mode.cached)
			var want []string
			for i := 0; i < 5; i++ {
				for _, ns := range []string{"a", "b", "c"} {
					name := fmt.Sprintf("e%d", i)
					if _, err := r.Create(coreRequest(ns), eventIn(ns, name, corev1.EventTypeNormal), rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
					if ns == "b" {
						want = append(want, ns+"/"+name)
					}
				}
			}
			selector := fields.OneTermEqualSelector("metadata.namespace", "b")
			for _, limit := range []int64{1, 2, 4} {
				var got []string
				continueToken := ""
				for page := 0; page < 20; page++ {
					list, err := r.List(coreRequest(""), &metainternalversion.ListOptions{FieldSelector: selector, Limit: limit, Continue: continueToken})
					if err != nil {
						t.Fatalf("limit %d, page %d: %v", limit, page, err)
					}
					events := list.(*core.EventList)
					for _, e := range events.Items {
						got = append(got, e.Namespace+"/"+e.Name)
					}
					if continueToken = events.Continue; continueToken == "" {
						break
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("limit %d: listed %q, want %q", limit, got, want)
				}
			}
		})
	}
}
