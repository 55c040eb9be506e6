package history

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// historyTTL is short so that the test sees Events expire by their leases.
const historyTTL = 3 * time.Second

// TestHistoryKeepsEveryVersion writes Events through both APIs, updates them
// as series the way client-go's recorders do, lets their leases expire, and
// then finds every version etcd held in history, with its content, through
// field selectors and the time window, newest first and paged.
func TestHistoryKeepsEveryVersion(t *testing.T) {
	t.Parallel()
	for _, store := range framework.HistoryStores {
		t.Run(store.Name, func(t *testing.T) { testHistoryKeepsEveryVersion(t, store.Args(t)) })
	}
}

func testHistoryKeepsEveryVersion(t *testing.T, storeArgs []string) {
	server := framework.StartServer(t, framework.ServerOptions{
		EventTTL:         historyTTL,
		EmbeddedEtcdPort: framework.FreePort(t),
		ExtraArgs:        append([]string{"--history-batch-interval=50ms"}, storeArgs...),
	})
	truth := framework.WatchEtcdTruth(t, framework.EtcdClient(t, server.EtcdURL))
	c := framework.AdminRawClient(t, server)
	ns := framework.UniqueName("history")
	ctx := framework.PollCtx(t)

	base := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(base.Add(d)) }
	podA := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-a", UID: types.UID(framework.UniqueName("uid-a")), APIVersion: "v1"}
	podB := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-b", UID: types.UID(framework.UniqueName("uid-b")), APIVersion: "v1"}
	podC := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-c", UID: types.UID(framework.UniqueName("uid-c")), APIVersion: "v1"}

	mustSend := func(r framework.Request, want int) {
		t.Helper()
		if resp := c.Send(t, r); resp.Code != want {
			t.Fatalf("%s %s: %d, want %d: %s", r.Method, r.Path, resp.Code, want, resp.Body)
		}
	}
	marshal := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// core/v1, as tools/record: a create, then strategic merge patches of
	// count, lastTimestamp and message.
	corePath := "/api/v1/namespaces/" + ns + "/events"
	mustSend(framework.Request{Method: "POST", Path: corePath, ContentType: "application/json", Body: marshal(&corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "pod-a.backoff"},
		InvolvedObject: podA, Reason: "BackOff", Message: "Back-off restarting failed container 1", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}, Count: 1,
		FirstTimestamp: at(time.Minute), LastTimestamp: at(time.Minute),
	})}, 201)
	for i := 2; i <= 3; i++ {
		mustSend(framework.Request{Method: "PATCH", Path: corePath + "/pod-a.backoff", ContentType: "application/strategic-merge-patch+json",
			Body: marshal(map[string]any{"count": i, "lastTimestamp": at(time.Duration(i) * time.Minute), "message": fmt.Sprint("Back-off restarting failed container ", i)})}, 200)
	}

	// events.k8s.io/v1, as tools/events: a singleton, then series heartbeats.
	eventsPath := "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"
	related := podA
	mustSend(framework.Request{Method: "POST", Path: eventsPath, ContentType: "application/json", Body: marshal(&eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-b.scheduled"},
		EventTime:  metav1.NewMicroTime(base.Add(90 * time.Second)), ReportingController: "default-scheduler", ReportingInstance: "scheduler-1",
		Action: "Binding", Reason: "Scheduled", Regarding: podB, Related: &related, Note: "assigned", Type: corev1.EventTypeNormal,
	})}, 201)
	for i := 2; i <= 3; i++ {
		mustSend(framework.Request{Method: "PATCH", Path: eventsPath + "/pod-b.scheduled", ContentType: "application/merge-patch+json",
			Body: marshal(map[string]any{"series": map[string]any{"count": i, "lastObservedTime": metav1.NewMicroTime(base.Add(time.Duration(i)*time.Minute + 30*time.Second))}})}, 200)
	}

	// Singletons about a third object, so that pages hold more than one object.
	for i := 0; i < 5; i++ {
		mustSend(framework.Request{Method: "POST", Path: corePath, ContentType: "application/json", Body: marshal(&corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("pod-c.%d", i)},
			InvolvedObject: podC, Reason: "Pulled", Message: fmt.Sprint("pulled ", i), Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "kubelet"}, Count: 1,
			FirstTimestamp: at(time.Duration(i) * 10 * time.Second), LastTimestamp: at(time.Duration(i) * 10 * time.Second),
		})}, 201)
	}

	// Every Event expires with its lease; the test's own etcd watch sees it.
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, historyTTL+60*time.Second, true, func(context.Context) (bool, error) {
		versions, deleted := truth.Snapshot(t)
		uids := map[string]bool{}
		for k := range versions {
			uids[k.UID] = true
		}
		return len(versions) == 3+3+5 && len(deleted) == len(uids) && len(uids) == 7, nil
	})
	if err != nil {
		versions, deleted := truth.Snapshot(t)
		t.Fatalf("waiting for 11 versions of 7 Events to be written and expire: %v (versions %d, deleted %d)", err, len(versions), len(deleted))
	}
	versions, deleted := truth.Snapshot(t)

	// History catches up: every version etcd held, once, marked deleted.
	var all []historyv1alpha1.EventRecord
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(context.Context) (bool, error) {
		all = framework.ListAllEventRecords(t, c, ns, "", 0)
		for _, r := range all {
			if r.Live {
				return false, nil
			}
		}
		return len(all) == len(versions), nil
	})
	if err != nil {
		t.Fatalf("history holds %d records (or some still live), want %d, all deleted: %v", len(all), len(versions), err)
	}
	seen := map[framework.VersionKey]bool{}
	for _, r := range all {
		key := framework.VersionKey{UID: string(r.Event.UID), RV: r.Event.ResourceVersion}
		want, ok := versions[key]
		if !ok || seen[key] {
			t.Errorf("record %s: in etcd %v, seen before %v", r.Name, ok, seen[key])
			continue
		}
		seen[key] = true
		if !deleted[key.UID] || r.DeletedAt == nil {
			t.Errorf("record %s: deletedAt %v, but etcd deleted the Event: %v", r.Name, r.DeletedAt, deleted[key.UID])
		}
		if r.Name != want.Name+"."+want.ResourceVersion || r.Namespace != ns {
			t.Errorf("record named %s/%s, want %s/%s.%s", r.Namespace, r.Name, ns, want.Name, want.ResourceVersion)
		}
		got := r.Event
		got.TypeMeta = metav1.TypeMeta{}
		if diff := cmp.Diff(framework.EventsV1FromCore(want), &got); diff != "" {
			t.Errorf("record %s differs from what etcd held (-etcd +history):\n%s", r.Name, diff)
		}
	}
	assertNewestFirst(t, all)

	uidA, uidB, uidC := string(podA.UID), string(podB.UID), string(podC.UID)
	byUID := func(uids ...string) []framework.VersionKey {
		var keys []framework.VersionKey
		for k := range versions {
			for _, u := range uids {
				if versions[k].InvolvedObject.UID == types.UID(u) {
					keys = append(keys, k)
				}
			}
		}
		return keys
	}
	rfc := func(d time.Duration) string { return base.Add(d).Format(time.RFC3339) }
	cases := []struct {
		name     string
		selector string
		want     []framework.VersionKey
	}{
		{"one object", "regarding.uid=" + uidA, byUID(uidA)},
		{"regarding or related", "regardingOrRelated.uid=" + uidA, byUID(uidA, uidB)},
		{"related", "related.name=pod-a", byUID(uidB)},
		{"name and kind", "regarding.name=pod-c,regarding.kind=Pod", byUID(uidC)},
		{"reason", "reason=BackOff", byUID(uidA)},
		{"type not", "type!=Warning", byUID(uidB, uidC)},
		{"reporting controller", "reportingController=default-scheduler", byUID(uidB)},
		{"not indexed: action", "action=Binding", byUID(uidB)},
		{"not indexed: source host", "regarding.apiVersion=v1,reportingInstance=scheduler-1", byUID(uidB)},
		{"window", "regarding.uid=" + uidA + ",since=" + rfc(2*time.Minute) + ",until=" + rfc(3*time.Minute), keysWithLastSeen(versions, base.Add(2*time.Minute), base.Add(3*time.Minute), uidA)},
		{"window as a duration", "since=168h", byUID(uidA, uidB, uidC)},
		{"window before everything", "until=" + rfc(-time.Minute), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{0, 1, 2} {
				got := framework.ListAllEventRecords(t, c, ns, tc.selector, limit)
				assertNewestFirst(t, got)
				if diff := cmp.Diff(sortedVersionKeys(tc.want), sortedVersionKeys(framework.RecordKeys(got)), cmp.AllowUnexported(framework.VersionKey{})); diff != "" {
					t.Errorf("limit %d: records (-want +got):\n%s", limit, diff)
				}
			}
		})
	}

	t.Run("all namespaces", func(t *testing.T) {
		got := framework.ListAllEventRecords(t, c, "", "regarding.uid="+uidA, 2)
		if len(got) != 3 {
			t.Fatalf("%d records of pod-a across namespaces, want 3", len(got))
		}
	})
	records := framework.HistoryClient(t, c).EventRecords(ns)
	t.Run("get", func(t *testing.T) {
		r, err := records.Get(context.Background(), all[0].Name, metav1.GetOptions{})
		if err != nil || r.Event.UID != all[0].Event.UID {
			t.Fatalf("GET %s: %v %+v", all[0].Name, err, r)
		}
		for _, name := range []string{"pod-a.backoff", "pod-a.backoff.1", "nope.x"} {
			if _, err := records.Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("GET %s: %v, want 404", name, err)
			}
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		for name, opts := range map[string]metav1.ListOptions{
			"unknown label":   {FieldSelector: "source=kubelet"},
			"bad time":        {FieldSelector: "since=yesterday"},
			"negative":        {FieldSelector: "since=-1h"},
			"since not =":     {FieldSelector: "since!=1h"},
			"empty window":    {FieldSelector: "since=1h,until=2h"},
			"bad continue":    {Continue: "not-a-token"},
			"forged continue": {Continue: "eyJ2Ijo5fQ"},
		} {
			if _, err := records.List(context.Background(), opts); !apierrors.IsBadRequest(err) {
				t.Errorf("%s: %v, want 400", name, err)
			}
		}
	})
}

// keysWithLastSeen are the versions of uid whose last occurrence is in [since, until).
func keysWithLastSeen(versions map[framework.VersionKey]*corev1.Event, since, until time.Time, uid string) []framework.VersionKey {
	var keys []framework.VersionKey
	for k, e := range versions {
		last := e.LastTimestamp.Time
		if e.Series != nil {
			last = e.Series.LastObservedTime.Time
		}
		if string(e.InvolvedObject.UID) == uid && !last.Before(since) && last.Before(until) {
			keys = append(keys, k)
		}
	}
	return keys
}

func sortedVersionKeys(keys []framework.VersionKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.UID+"@"+k.RV)
	}
	sort.Strings(out)
	return out
}

// assertNewestFirst checks the read order: lastSeen, then resourceVersion, descending.
func assertNewestFirst(t *testing.T, records []historyv1alpha1.EventRecord) {
	t.Helper()
	for i := 1; i < len(records); i++ {
		prev, cur := records[i-1], records[i]
		prevRV, _ := strconv.ParseInt(prev.Event.ResourceVersion, 10, 64)
		curRV, _ := strconv.ParseInt(cur.Event.ResourceVersion, 10, 64)
		if cur.LastSeen.After(prev.LastSeen.Time) || (cur.LastSeen.Equal(&prev.LastSeen) && curRV >= prevRV) {
			t.Fatalf("records %d and %d out of order: %s (%s) before %s (%s)", i-1, i, prev.Name, prev.LastSeen, cur.Name, cur.LastSeen)
		}
	}
}
