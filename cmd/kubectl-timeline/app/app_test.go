package app

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

// TestResolveObject without discovery: a server serving only Events knows
// no pods, and the plugin must still understand what kubectl users type.
func TestResolveObject(t *testing.T) {
	tests := []struct {
		args    []string
		want    Object
		wantErr string
	}{
		{args: []string{"pod/web-0"}, want: Object{"Pod", "web-0", ""}},
		{args: []string{"pods/web-0"}, want: Object{"Pod", "web-0", ""}},
		{args: []string{"po/web-0"}, want: Object{"Pod", "web-0", ""}},
		{args: []string{"Pod/web-0"}, want: Object{"Pod", "web-0", ""}},
		{args: []string{"pod", "web-0"}, want: Object{"Pod", "web-0", ""}},
		{args: []string{"sts/db"}, want: Object{"StatefulSet", "db", "apps"}},
		{args: []string{"deployments.apps/web"}, want: Object{"Deployment", "web", "apps"}},
		{args: []string{"node/n1"}, want: Object{"Node", "n1", ""}},
		{args: []string{"Widget/w"}, want: Object{"Widget", "w", ""}},
		{args: []string{"widgets/w"}, wantErr: `the server doesn't have a resource type "widgets"`},
		{args: []string{"web-0"}, wantErr: "want one object as TYPE/NAME"},
		{args: []string{"pod/"}, wantErr: "want one object as TYPE/NAME"},
		{args: []string{"pod/web/0"}, wantErr: "want one object as TYPE/NAME"},
		{args: []string{"pod/web-0", "x"}, wantErr: "want one object as TYPE/NAME"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, err := ResolveObject(nil, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestHistoryUnavailable(t *testing.T) {
	gr := schema.GroupResource{Group: historyv1alpha1.GroupName, Resource: "eventrecords"}
	tests := []struct {
		name      string
		err       error
		namespace string
		want      string // "" when the error is the command's failure
	}{
		{"no error", nil, "ns", ""},
		{"group not served", apierrors.NewNotFound(gr, ""), "ns", "history is not installed on this server"},
		{"forbidden in a namespace", apierrors.NewForbidden(gr, "", errors.New(`User "u" cannot list`)), "ns", `you may not list history in namespace ns (eventrecords.history.eventapiserver.io): eventrecords.history.eventapiserver.io is forbidden: User "u" cannot list`},
		{"forbidden across namespaces", apierrors.NewForbidden(gr, "", errors.New("no")), "", "you may not list history across all namespaces"},
		{"store down", apierrors.NewServiceUnavailable("history store: closed"), "ns", "history is unavailable: history store: closed"},
		{"a bad request is a failure", apierrors.NewBadRequest("field label not supported: x"), "ns", ""},
		{"a connection error is a failure", errors.New("connection refused"), "ns", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := historyUnavailable(tc.err, tc.namespace)
			if ok != (tc.want != "") || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestSelectors(t *testing.T) {
	since := time.Date(2026, 11, 26, 6, 0, 0, 500, time.UTC)
	tests := []struct {
		name          string
		filter        timeline.Filter
		cluster       string
		live, history string
	}{
		{"object only", timeline.Filter{}, "",
			"involvedObject.kind=Pod,involvedObject.name=web-0",
			"regarding.kind=Pod,regarding.name=web-0"},
		{"one type goes to the server", timeline.Filter{Types: []string{"Warning"}}, "",
			"involvedObject.kind=Pod,involvedObject.name=web-0,type=Warning",
			"regarding.kind=Pod,regarding.name=web-0,type=Warning"},
		{"both types are every Event", timeline.Filter{Types: []string{"Normal", "Warning"}}, "",
			"involvedObject.kind=Pod,involvedObject.name=web-0",
			"regarding.kind=Pod,regarding.name=web-0"},
		{"since cuts history on the server", timeline.Filter{Since: since}, "",
			"involvedObject.kind=Pod,involvedObject.name=web-0",
			"regarding.kind=Pod,regarding.name=web-0,since=2026-11-26T06:00:00.0000005Z"},
		{"search goes to history, escaped", timeline.Filter{Since: since, Search: "x509, expired"}, "",
			"involvedObject.kind=Pod,involvedObject.name=web-0",
			`regarding.kind=Pod,regarding.name=web-0,since=2026-11-26T06:00:00.0000005Z,note.contains=x509\, expired`},
		{"the cluster goes to history", timeline.Filter{Types: []string{"Warning"}, Since: since, Search: "x509"}, "eu-west-1",
			"involvedObject.kind=Pod,involvedObject.name=web-0,type=Warning",
			"regarding.kind=Pod,regarding.name=web-0,type=Warning,since=2026-11-26T06:00:00.0000005Z,cluster=eu-west-1,note.contains=x509"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &sources{object: Object{"Pod", "web-0", ""}, filter: tc.filter, cluster: tc.cluster}
			if got := s.liveSelector(); got != tc.live {
				t.Errorf("live %q, want %q", got, tc.live)
			}
			if got := s.historySelector(); got != tc.history {
				t.Errorf("history %q, want %q", got, tc.history)
			}
		})
	}
}

func TestHumanPrinter(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	deleted := metav1.NewTime(now.Add(-20 * time.Hour))
	list := &historyv1alpha1.EventRecordList{Items: []historyv1alpha1.EventRecord{{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0.a.10", Namespace: "shop"},
		Event: eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0.a"}, Regarding: corev1.ObjectReference{Kind: "Pod", Name: "web-0", UID: "uid-1"},
			Type: "Warning", Reason: "BackOff", Note: "Back-off restarting\x1b[31m  ",
			DeprecatedSource: corev1.EventSource{Component: "kubelet"}, DeprecatedCount: 4,
			DeprecatedFirstTimestamp: metav1.NewTime(now.Add(-30 * time.Hour)), DeprecatedLastTimestamp: metav1.NewTime(now.Add(-29 * time.Hour)),
		},
		LastSeen: metav1.NewTime(now.Add(-29 * time.Hour)), DeletedAt: &deleted,
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "web-0.b.20", Namespace: "shop"},
		Event: eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0.b"}, Regarding: corev1.ObjectReference{Kind: "Pod", Name: "web-0", UID: "uid-2"},
			Type: "Normal", Reason: "Scheduled", Note: "assigned", ReportingController: "default-scheduler",
			EventTime: metav1.NewMicroTime(now.Add(-2 * time.Minute)), Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(now.Add(-time.Minute))},
		},
		LastSeen: metav1.NewTime(now.Add(-time.Minute)), Live: true,
	}}}
	tests := []struct {
		name    string
		printer humanPrinter
		want    string
	}{{
		name:    "default",
		printer: humanPrinter{},
		want: `FIRST SEEN   LAST SEEN   TYPE      REASON      COUNT   REPORTER            UID     MESSAGE
30h          29h         Warning   BackOff     4       kubelet             uid-1   Back-off restarting^[[31m
2m           60s         Normal    Scheduled   2       default-scheduler   uid-2   assigned
`,
	}, {
		name:    "wide, all namespaces, no headers",
		printer: humanPrinter{wide: true, allNamespaces: true, noHeaders: true},
		want: `shop   30h   29h   Warning   BackOff     4     kubelet             uid-1   web-0.a   deleted 20h ago   Back-off restarting^[[31m
shop   2m    60s   Normal    Scheduled   2     default-scheduler   uid-2   web-0.b   live              assigned
`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := tc.printer
			p.now = func() time.Time { return now }
			w := printers.GetNewTabWriter(&out)
			if err := p.PrintObj(list, w); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestNoObjectWithoutWeb: only the page has a view without an object, and
// the error says so rather than quoting an empty TYPE/NAME.
func TestNoObjectWithoutWeb(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	flags := NewFlags(genericiooptions.NewTestIOStreamsDiscard())
	if _, err := flags.ToOptions(nil); err == nil || !strings.Contains(err.Error(), "or --web") {
		t.Fatalf("no object, no --web: err %v, want one naming --web", err)
	}
	flags.Web = true
	if o, err := flags.ToOptions(nil); err != nil || o.Object != (Object{}) {
		t.Fatalf("--web alone: %+v, %v, want the overview (no object)", o, err)
	}
}
