package events

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

const kubectlNamespace = "kubectl"

// coreEventYAML is what a person would kubectl create through core/v1.
const coreEventYAML = `apiVersion: v1
kind: Event
metadata:
  name: web-0.backoff
  namespace: kubectl
  labels:
    app: web
involvedObject:
  apiVersion: v1
  kind: Pod
  name: web-0
  namespace: kubectl
  uid: 6f0a2c9e-0000-4000-8000-000000000001
  resourceVersion: "1234"
  fieldPath: spec.containers{web}
reason: BackOff
message: Back-off restarting failed container web
source:
  component: kubelet
  host: node-1
firstTimestamp: "2024-05-01T10:00:00Z"
lastTimestamp: "2024-05-01T10:05:00Z"
count: 7
type: Warning
reportingComponent: kubelet
reportingInstance: node-1
`

// eventsV1EventYAML is the same through events.k8s.io/v1, with a series.
const eventsV1EventYAML = `apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: web-1.scheduled
  namespace: kubectl
eventTime: "2024-05-01T10:00:00.123456Z"
series:
  count: 4
  lastObservedTime: "2024-05-01T10:09:00.654321Z"
reportingController: example.com/scheduler
reportingInstance: scheduler-1
action: Binding
reason: Scheduled
regarding:
  apiVersion: v1
  kind: Pod
  name: web-1
  namespace: kubectl
  uid: 6f0a2c9e-0000-4000-8000-000000000002
related:
  apiVersion: v1
  kind: Node
  name: node-2
note: Successfully assigned kubectl/web-1 to node-2
type: Normal
`

// TestKubectl drives one server with the preinstalled kubectl the way a
// person would, and checks what each command leaves in storage through the
// other API with typed clients.
func TestKubectl(t *testing.T) {
	t.Parallel()
	framework.PreinstalledKubectl(t) // skip early without kubectl
	server := framework.StartServer(t, framework.ServerOptions{})
	client := server.Client(t)
	kc := server.Kubeconfig
	ctx := context.Background()

	var coreWant corev1.Event
	if err := yaml.UnmarshalStrict([]byte(coreEventYAML), &coreWant); err != nil {
		t.Fatal(err)
	}
	var eventsWant eventsv1.Event
	if err := yaml.UnmarshalStrict([]byte(eventsV1EventYAML), &eventsWant); err != nil {
		t.Fatal(err)
	}

	t.Run("api-resources", func(t *testing.T) {
		out := framework.MustKubectl(t, kc, "api-resources", "--no-headers")
		want := map[string]bool{
			"events ev v1 true Event":               false,
			"events ev events.k8s.io/v1 true Event": false,
			// Our own read-only history: no short name, so "ev" stays Events.
			"eventrecords history.eventapiserver.io/v1alpha1 true EventRecord": false,
			// Create-only questions about them, as SubjectAccessReviews are.
			"eventrecordcounts history.eventapiserver.io/v1alpha1 true EventRecordCount":                false,
			"clustereventrecordcounts history.eventapiserver.io/v1alpha1 false ClusterEventRecordCount": false,
		}
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			line = strings.Join(strings.Fields(line), " ")
			lines = append(lines, line)
			if _, ok := want[line]; ok {
				want[line] = true
			}
		}
		for line, seen := range want {
			if !seen {
				t.Errorf("api-resources lacks %q; got:\n%s", line, out)
			}
		}
		if len(lines) != len(want) {
			t.Errorf("api-resources lists %d resources, want only the %d resources above:\n%s", len(lines), len(want), out)
		}
	})

	t.Run("create core/v1 and read as events.k8s.io/v1", func(t *testing.T) {
		out := framework.MustKubectl(t, kc, "create", "-f", framework.WriteFile(t, "core.yaml", coreEventYAML))
		if got, want := strings.TrimSpace(out), "event/web-0.backoff created"; got != want {
			t.Errorf("kubectl create said %q, want %q", got, want)
		}
		got, err := client.EventsV1().Events(kubectlNamespace).Get(ctx, coreWant.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := framework.EventsV1FromCore(&coreWant)
		want.ObjectMeta = got.ObjectMeta
		assertSameEventsV1Event(t, "kubectl-created core/v1 Event", want, got)
	})

	t.Run("create events.k8s.io/v1 and read as core/v1", func(t *testing.T) {
		out := framework.MustKubectl(t, kc, "create", "-f", framework.WriteFile(t, "events.yaml", eventsV1EventYAML))
		if got, want := strings.TrimSpace(out), "event.events.k8s.io/web-1.scheduled created"; got != want {
			t.Errorf("kubectl create said %q, want %q", got, want)
		}
		got, err := client.CoreV1().Events(kubectlNamespace).Get(ctx, eventsWant.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := framework.CoreFromEventsV1(&eventsWant)
		want.ObjectMeta = got.ObjectMeta
		assertSameCoreEvent(t, "kubectl-created events.k8s.io/v1 Event", want, got)
	})

	t.Run("get events -A", func(t *testing.T) {
		out := framework.MustKubectl(t, kc, "get", "events", "-A")
		rows := framework.ParseTable(t, out)
		wantHeaders := []string{"NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}
		framework.AssertHeaders(t, out, wantHeaders)
		assertRow(t, rows, "OBJECT", "pod/web-0", map[string]string{
			"NAMESPACE": kubectlNamespace, "TYPE": "Warning", "REASON": "BackOff",
			"MESSAGE": "Back-off restarting failed container web",
		})
		assertRow(t, rows, "OBJECT", "pod/web-1", map[string]string{
			"NAMESPACE": kubectlNamespace, "TYPE": "Normal", "REASON": "Scheduled",
			"MESSAGE": "Successfully assigned kubectl/web-1 to node-2",
		})
	})

	t.Run("get events.v1.events.k8s.io -o yaml", func(t *testing.T) {
		out := framework.MustKubectl(t, kc, "get", "events.v1.events.k8s.io", "-n", kubectlNamespace, "-o", "yaml")
		var list struct {
			Kind  string           `json:"kind"`
			Items []eventsv1.Event `json:"items"`
		}
		if err := yaml.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("decoding kubectl output: %v\n%s", err, out)
		}
		byName := map[string]eventsv1.Event{}
		for _, item := range list.Items {
			if item.APIVersion != "events.k8s.io/v1" || item.Kind != "Event" {
				t.Errorf("item %s is %s %s, want events.k8s.io/v1 Event", item.Name, item.APIVersion, item.Kind)
			}
			byName[item.Name] = item
		}
		core, ok := byName[coreWant.Name]
		if !ok {
			t.Fatalf("-o yaml lacks %s:\n%s", coreWant.Name, out)
		}
		want := framework.EventsV1FromCore(&coreWant)
		want.ObjectMeta = core.ObjectMeta
		assertSameEventsV1Event(t, "-o yaml of the core/v1 Event", want, &core)
		for _, field := range []string{"regarding:", "note:", "deprecatedSource:", "deprecatedCount: 7", "deprecatedFirstTimestamp:"} {
			if !strings.Contains(out, field) {
				t.Errorf("-o yaml lacks %q:\n%s", field, out)
			}
		}
	})

	t.Run("describe events", func(t *testing.T) {
		out := framework.MustKubectl(t, kc, "describe", "events", coreWant.Name, "-n", kubectlNamespace)
		for _, want := range []string{
			"Name:", coreWant.Name,
			"Namespace:", kubectlNamespace,
			"Involved Object:", "web-0", "spec.containers{web}",
			"Message:", coreWant.Message,
			"Reason:", "BackOff",
			"Source:", "kubelet", "node-1",
			"Count:", "7",
			"Type:", "Warning",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("describe lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("explain", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
			want []string
		}{
			{
				name: "core/v1 from OpenAPI v3",
				args: []string{"explain", "events"},
				want: []string{"KIND:", "Event", "VERSION:", "v1", "FIELDS:",
					"involvedObject", "message", "reason", "source", "firstTimestamp", "lastTimestamp",
					"count", "eventTime", "series", "reportingComponent", "reportingInstance", "related", "action"},
			},
			{
				name: "events.k8s.io/v1 from OpenAPI v3",
				args: []string{"explain", "events", "--api-version=events.k8s.io/v1"},
				want: []string{"GROUP:", "events.k8s.io", "KIND:", "Event", "FIELDS:",
					"regarding", "note", "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
					"deprecatedCount", "eventTime", "series", "reportingController", "reportingInstance", "related", "action"},
			},
			{
				name: "nested field",
				args: []string{"explain", "events.involvedObject"},
				want: []string{"FIELD: involvedObject <ObjectReference>", "fieldPath", "uid", "resourceVersion"},
			},
			{
				name: "core/v1 from OpenAPI v2",
				args: []string{"explain", "events", "--output=plaintext-openapiv2"},
				want: []string{"KIND:", "Event", "VERSION:", "v1", "FIELDS:", "involvedObject", "message", "reportingComponent"},
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				out := framework.MustKubectl(t, kc, tc.args...)
				for _, want := range tc.want {
					if !strings.Contains(out, want) {
						t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(tc.args, " "), want, out)
					}
				}
			})
		}
	})

	t.Run("patch", func(t *testing.T) {
		tests := []struct {
			name  string
			args  []string
			check func(t *testing.T, e *eventsv1.Event)
		}{
			{
				name: "merge",
				args: []string{"--type=merge", "-p", `{"message":"patched by merge"}`},
				check: func(t *testing.T, e *eventsv1.Event) {
					if e.Note != "patched by merge" {
						t.Errorf("note = %q, want %q", e.Note, "patched by merge")
					}
				},
			},
			{
				name: "strategic",
				args: []string{"--type=strategic", "-p", `{"count":9,"lastTimestamp":"2024-05-01T10:09:00Z"}`},
				check: func(t *testing.T, e *eventsv1.Event) {
					if e.DeprecatedCount != 9 {
						t.Errorf("deprecatedCount = %d, want 9", e.DeprecatedCount)
					}
					if got := e.DeprecatedLastTimestamp.UTC().Format("2006-01-02T15:04:05Z"); got != "2024-05-01T10:09:00Z" {
						t.Errorf("deprecatedLastTimestamp = %s, want 2024-05-01T10:09:00Z", got)
					}
				},
			},
			{
				name: "json",
				args: []string{"--type=json", "-p", `[{"op":"replace","path":"/reason","value":"CrashLoop"}]`},
				check: func(t *testing.T, e *eventsv1.Event) {
					if e.Reason != "CrashLoop" {
						t.Errorf("reason = %q, want CrashLoop", e.Reason)
					}
				},
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				args := append([]string{"patch", "events", coreWant.Name, "-n", kubectlNamespace}, tc.args...)
				out := framework.MustKubectl(t, kc, args...)
				if !strings.Contains(out, "event/"+coreWant.Name+" patched") {
					t.Errorf("kubectl patch said %q", out)
				}
				got, err := client.EventsV1().Events(kubectlNamespace).Get(ctx, coreWant.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, got)
			})
		}
	})

	t.Run("edit", func(t *testing.T) {
		// kubectl edit runs $KUBE_EDITOR on a temp file and sends the
		// difference as a strategic merge patch.
		stdout, stderr, err := framework.KubectlWithEnv(t, kc, []string{`KUBE_EDITOR=sed -i -e 's/^message: .*/message: edited in an editor/'`},
			"edit", "events", coreWant.Name, "-n", kubectlNamespace)
		if err != nil {
			t.Fatalf("kubectl edit: %v\n%s\n%s", err, stdout, stderr)
		}
		got, err := client.EventsV1().Events(kubectlNamespace).Get(ctx, coreWant.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Note != "edited in an editor" {
			t.Errorf("note after edit = %q, want %q", got.Note, "edited in an editor")
		}
	})

	t.Run("apply --server-side", func(t *testing.T) {
		applied := strings.ReplaceAll(coreEventYAML, "web-0.backoff", "web-0.applied")
		framework.MustKubectl(t, kc, "apply", "--server-side", "-f", framework.WriteFile(t, "apply.yaml", applied))
		// A second apply with a changed message updates the same object.
		applied = strings.ReplaceAll(applied, "Back-off restarting failed container web", "applied again")
		out := framework.MustKubectl(t, kc, "apply", "--server-side", "-f", framework.WriteFile(t, "apply2.yaml", applied))
		if !strings.Contains(out, "event/web-0.applied serverside-applied") {
			t.Errorf("kubectl apply said %q", out)
		}
		got, err := client.EventsV1().Events(kubectlNamespace).Get(ctx, "web-0.applied", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Note != "applied again" || got.DeprecatedCount != 7 || got.Regarding.Name != "web-0" {
			t.Errorf("after apply: note=%q deprecatedCount=%d regarding=%s, want %q, 7, web-0",
				got.Note, got.DeprecatedCount, got.Regarding.Name, "applied again")
		}
		var applyManager bool
		for _, mf := range got.ManagedFields {
			if mf.Manager == "kubectl" && mf.Operation == metav1.ManagedFieldsOperationApply {
				applyManager = true
			}
		}
		if !applyManager {
			t.Errorf("managedFields lack kubectl's Apply entry: %+v", got.ManagedFields)
		}

		// events.k8s.io/v1 through apply creates too.
		eventsApplied := strings.ReplaceAll(eventsV1EventYAML, "web-1.scheduled", "web-1.applied")
		framework.MustKubectl(t, kc, "apply", "--server-side", "-f", framework.WriteFile(t, "apply3.yaml", eventsApplied))
		core, err := client.CoreV1().Events(kubectlNamespace).Get(ctx, "web-1.applied", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if core.Message != eventsWant.Note || core.Series == nil || core.Series.Count != 4 {
			t.Errorf("applied events.k8s.io/v1 Event reads as message=%q series=%+v", core.Message, core.Series)
		}
	})

	t.Run("table columns", func(t *testing.T) {
		out := framework.MustKubectl(t, kc, "get", "events", "-n", kubectlNamespace)
		framework.AssertHeaders(t, out, []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"})

		out = framework.MustKubectl(t, kc, "get", "events.events.k8s.io", "-n", kubectlNamespace, "-o", "wide")
		framework.AssertHeaders(t, out, []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE",
			"MESSAGE", "FIRST SEEN", "COUNT", "NAME"})
		rows := framework.ParseTable(t, out)
		assertRow(t, rows, "NAME", coreWant.Name, map[string]string{
			"TYPE":      "Warning",
			"REASON":    "CrashLoop",
			"OBJECT":    "pod/web-0",
			"SUBOBJECT": "spec.containers{web}",
			"SOURCE":    "kubelet, node-1",
			"MESSAGE":   "edited in an editor",
			"COUNT":     "9",
		})
		assertRow(t, rows, "NAME", eventsWant.Name, map[string]string{
			"TYPE":      "Normal",
			"REASON":    "Scheduled",
			"OBJECT":    "pod/web-1",
			"SUBOBJECT": "",
			"SOURCE":    "example.com/scheduler, scheduler-1",
			"MESSAGE":   "Successfully assigned kubectl/web-1 to node-2",
			"COUNT":     "4",
		})
		for _, row := range rows {
			for _, col := range []string{"LAST SEEN", "FIRST SEEN"} {
				if row[col] == "" || row[col] == "<unknown>" {
					t.Errorf("row %s: %s = %q, want an age", row["NAME"], col, row[col])
				}
			}
		}
	})

	t.Run("delete", func(t *testing.T) {
		tests := []struct {
			resource, name, said string
		}{
			{"events", coreWant.Name, `event "web-0.backoff" deleted`},
			{"events.events.k8s.io", eventsWant.Name, `event.events.k8s.io "web-1.scheduled" deleted`},
		}
		for _, tc := range tests {
			t.Run(tc.resource, func(t *testing.T) {
				out := framework.MustKubectl(t, kc, "delete", tc.resource, tc.name, "-n", kubectlNamespace)
				if !strings.Contains(out, tc.said) {
					t.Errorf("kubectl delete said %q, want %q", out, tc.said)
				}
				assertGone(t, client, kubectlNamespace, tc.name)
			})
		}
	})
}

// assertGone checks that neither API finds the Event.
func assertGone(t *testing.T, client kubernetes.Interface, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Events(namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("core/v1 GET %s after delete: %v, want NotFound", name, err)
	}
	if _, err := client.EventsV1().Events(namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("events.k8s.io/v1 GET %s after delete: %v, want NotFound", name, err)
	}
}

// assertRow finds the row whose key column equals value and checks cells.
func assertRow(t *testing.T, rows []map[string]string, key, value string, want map[string]string) {
	t.Helper()
	for _, row := range rows {
		if row[key] != value {
			continue
		}
		for col, w := range want {
			if row[col] != w {
				t.Errorf("row %s=%s: %s = %q, want %q", key, value, col, row[col], w)
			}
		}
		return
	}
	t.Errorf("no row with %s=%s in %v", key, value, rows)
}
