package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// otelcolBinary is the OpenTelemetry Collector that hack/build-otelcol.sh
// builds with the collector builder; the test skips without it, except
// under CI, where hack/test.sh has built it.
func otelcolBinary(t *testing.T) string {
	t.Helper()
	path, err := testbed.OutputBinary("otelcol")
	if err == nil {
		_, err = os.Stat(path)
	}
	if err != nil {
		err = fmt.Errorf("the OpenTelemetry Collector is not built (run hack/build-otelcol.sh): %w", err)
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return path
}

// otelPhase is a stretch of the test during which the collectors were all
// running (up) or all stopped (down).
type otelPhase struct {
	name string
	up   bool
}

// collectorRun is one OpenTelemetry Collector with the k8sobjects receiver
// watching eventrecords and the file exporter appending to out.
type collectorRun struct {
	name string
	proc *testbed.Process
	out  string
}

// startCollector writes the collector's configuration (the one
// docs/operations.md shows) and starts it. resourceVersion, when set, is the
// receiver's resource_version: where its watch starts on every start.
func startCollector(t *testing.T, bin, dir, name, kubeconfig, ns, resourceVersion string) *collectorRun {
	t.Helper()
	c := &collectorRun{name: name, out: filepath.Join(dir, name+".jsonl")}
	pinned := ""
	if resourceVersion != "" {
		pinned = fmt.Sprintf("\n        resource_version: %q", resourceVersion)
	}
	config := fmt.Sprintf(`receivers:
  k8sobjects:
    auth_type: kubeConfig
    objects:
      - name: eventrecords
        group: history.eventapiserver.io
        mode: watch
        namespaces: [%s]%s
exporters:
  file:
    path: %s
    append: true
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [k8sobjects]
      exporters: [file]
`, ns, pinned, c.out)
	configPath := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// The receiver's auth_type kubeConfig reads $KUBECONFIG as kubectl does;
	// env execs the collector, so signals reach it directly.
	c.proc = &testbed.Process{Name: "otelcol " + name, Path: "env", LogPath: filepath.Join(dir, name+".log"),
		Args: []string{"KUBECONFIG=" + kubeconfig, bin, "--config=" + configPath}}
	if err := c.proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.proc.Stop() })
	return c
}

// exportedRecord is what the test reads back from one OTLP log record of the
// file exporter: the watch event type and the eventrecord it carried.
type exportedRecord struct {
	watchType string
	name      string
	key       framework.VersionKey
	deleted   bool
	reason    string
	attrs     map[string]any
	resource  map[string]any
}

// readExported decodes the file exporter's OTLP JSON lines, one export a
// line.
func (c *collectorRun) readExported(t *testing.T) []exportedRecord {
	t.Helper()
	data, err := os.ReadFile(c.out)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// A line the exporter is still writing is read next time.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []exportedRecord
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(nil, 16<<20)
	for scanner.Scan() {
		var req otlpLogsRequest
		if err := json.Unmarshal(scanner.Bytes(), &req); err != nil {
			t.Fatalf("%s: a line that is not OTLP JSON logs: %v: %s", c.out, err, scanner.Bytes())
		}
		for _, rl := range req.ResourceLogs {
			resource := otlpAttributes(rl.Resource.Attributes)
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					body, _ := lr.Body.value().(map[string]any)
					obj, _ := body["object"].(map[string]any)
					objMeta, _ := obj["metadata"].(map[string]any)
					name, _ := objMeta["name"].(string)
					event, _ := obj["event"].(map[string]any)
					meta, _ := event["metadata"].(map[string]any)
					uid, _ := meta["uid"].(string)
					rv, _ := meta["resourceVersion"].(string)
					typ, _ := body["type"].(string)
					reason, _ := event["reason"].(string)
					_, deleted := obj["deletedAt"]
					if uid == "" || rv == "" || typ == "" {
						t.Fatalf("%s: a log record whose body is not a watch event of an eventrecord: %v", c.out, body)
					}
					out = append(out, exportedRecord{watchType: typ, name: name, key: framework.VersionKey{UID: uid, RV: rv}, deleted: deleted,
						reason: reason, attrs: otlpAttributes(lr.Attributes), resource: resource})
				}
			}
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// OTLP's JSON encoding of logs (opentelemetry-proto's ExportLogsServiceRequest),
// only as far as the test reads it.
type otlpLogsRequest struct {
	ResourceLogs []struct {
		Resource struct {
			Attributes []otlpKeyValue `json:"attributes"`
		} `json:"resource"`
		ScopeLogs []struct {
			LogRecords []struct {
				Attributes []otlpKeyValue `json:"attributes"`
				Body       otlpAnyValue   `json:"body"`
			} `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

type otlpKeyValue struct {
	Key   string       `json:"key"`
	Value otlpAnyValue `json:"value"`
}

type otlpAnyValue struct {
	StringValue *string  `json:"stringValue"`
	BoolValue   *bool    `json:"boolValue"`
	IntValue    *string  `json:"intValue"` // int64 is a JSON string in OTLP/JSON
	DoubleValue *float64 `json:"doubleValue"`
	KvlistValue *struct {
		Values []otlpKeyValue `json:"values"`
	} `json:"kvlistValue"`
	ArrayValue *struct {
		Values []otlpAnyValue `json:"values"`
	} `json:"arrayValue"`
}

func (v otlpAnyValue) value() any {
	switch {
	case v.StringValue != nil:
		return *v.StringValue
	case v.BoolValue != nil:
		return *v.BoolValue
	case v.IntValue != nil:
		n, _ := strconv.ParseInt(*v.IntValue, 10, 64)
		return n
	case v.DoubleValue != nil:
		return *v.DoubleValue
	case v.KvlistValue != nil:
		return otlpAttributes(v.KvlistValue.Values)
	case v.ArrayValue != nil:
		out := make([]any, 0, len(v.ArrayValue.Values))
		for _, e := range v.ArrayValue.Values {
			out = append(out, e.value())
		}
		return out
	}
	return nil
}

func otlpAttributes(kvs []otlpKeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = kv.Value.value()
	}
	return out
}

// TestOTelCollectorFeed runs the real OpenTelemetry Collector, built by
// hack/build-otelcol.sh, on the eventrecords feed: its k8sobjects receiver
// watches eventrecords, its file exporter writes OTLP logs. Events are
// created, updated and expire while the collectors run, while they are
// stopped (once with SIGTERM, once with SIGKILL), and after they are
// restarted. Every version the feed holds (uid and resourceVersion of the
// Event, and the end of each that expired) is then counted in each
// collector's file.
//
// The receiver (contrib v0.148.0) keeps no checkpoint: on every start it
// lists to get a resourceVersion and watches from there, or it watches from
// its configured resource_version. So exactly-once across a restart is out
// of its reach, and the test pins what it does instead:
//   - "fresh" (no resource_version, the default): each version written while
//     it runs is exported once; each written while it is stopped is missed,
//     never exported, and so is the end of an Event that expired meanwhile.
//   - "pinned" (resource_version: the feed's cursor when the test starts):
//     nothing is missed; on each start it replays the feed from that cursor,
//     so a version is exported once for every start at or after it was written.
//
// A change in either behaviour (a receiver that checkpoints, or a feed that
// loses or repeats records) fails the test.
func TestOTelCollectorFeed(t *testing.T) {
	t.Parallel()
	bin := otelcolBinary(t)
	server := framework.StartServer(t, framework.ServerOptions{
		EventTTL:  time.Hour,
		ExtraArgs: []string{"--history-batch-interval=100ms", "--event-ttl-rule=reason=Expiring:2s"},
	})
	ctx := framework.PollCtx(t)
	client := server.Client(t)
	raw := framework.AdminRawClient(t, server)
	ns := framework.UniqueName("otel")
	dir := t.TempDir()

	// The pinned collector starts from the feed's cursor before any Event of
	// the test was written.
	list, err := framework.HistoryClient(t, raw).EventRecords(ns).List(ctx, metav1.ListOptions{})
	if err != nil || list.ResourceVersion == "" {
		t.Fatalf("listing eventrecords: %v %+v", err, list)
	}
	startCursor := list.ResourceVersion

	phases := []otelPhase{{"running", true}, {"stopped with SIGTERM", false}, {"restarted", true},
		{"stopped with SIGKILL", false}, {"restarted again", true}}
	// Where each version and each end was written.
	versionPhase := map[framework.VersionKey]int{}
	versionName := map[framework.VersionKey]string{}
	endPhase := map[string]int{}
	phase := 0

	pod := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", UID: types.UID(framework.UniqueName("uid")), APIVersion: "v1"}
	create := func(name, reason string) *corev1.Event {
		t.Helper()
		now := metav1.Now()
		ev, err := client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: pod, Reason: reason, Message: name + " happened", Type: corev1.EventTypeWarning,
			Count: 1, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	write := func(name, reason string) {
		t.Helper()
		ev := create(name, reason)
		versionPhase[framework.VersionKey{UID: string(ev.UID), RV: ev.ResourceVersion}] = phase
		versionName[framework.VersionKey{UID: string(ev.UID), RV: ev.ResourceVersion}] = name
	}
	update := func(name string, count int) {
		t.Helper()
		ev, err := client.CoreV1().Events(ns).Patch(ctx, name, types.StrategicMergePatchType,
			[]byte(fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, count, time.Now().UTC().Format(time.RFC3339))), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versionPhase[framework.VersionKey{UID: string(ev.UID), RV: ev.ResourceVersion}] = phase
		versionName[framework.VersionKey{UID: string(ev.UID), RV: ev.ResourceVersion}] = name
	}
	// expire writes Events that the TTL rule removes after 2s and waits
	// until history has seen them go, so that each end falls in the phase
	// that wrote it.
	expire := func(names ...string) {
		t.Helper()
		for _, name := range names {
			ev := create(name, "Expiring")
			versionPhase[framework.VersionKey{UID: string(ev.UID), RV: ev.ResourceVersion}] = phase
			versionName[framework.VersionKey{UID: string(ev.UID), RV: ev.ResourceVersion}] = name
			endPhase[string(ev.UID)] = phase
		}
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
			ended := 0
			for _, r := range framework.ListAllEventRecords(t, raw, ns, "reason=Expiring", 500) {
				if !r.Live && endPhase[string(r.Event.UID)] == phase {
					ended++
				}
			}
			return ended == len(names), nil
		})
		if err != nil {
			t.Fatalf("the Expiring Events %v did not expire: %v", names, err)
		}
	}

	// How often a collector has exported, by the end of phase now, a
	// version or end written in phase p: the fresh one once if it was
	// running, never if it was stopped; the pinned one once for each of its
	// starts (phases 0, 2 and 4) at or after p, each replaying the feed from
	// its cursor.
	runStarts := []int{0, 2, 4}
	var fresh *collectorRun
	want := func(c *collectorRun, p, now int) int {
		if c == fresh {
			if phases[p].up {
				return 1
			}
			return 0
		}
		n := 0
		for _, start := range runStarts {
			if start >= p && start <= now {
				n++
			}
		}
		return n
	}

	fresh = startCollector(t, bin, dir, "fresh", server.Kubeconfig, ns, "")
	pinned := startCollector(t, bin, dir, "pinned", server.Kubeconfig, ns, startCursor)
	collectors := []*collectorRun{fresh, pinned}
	// watching waits until every collector has its watch open: a probe
	// Event (left out of the comparison) is written until each exported one.
	// The fresh receiver misses those written before its initial list.
	watching := func() {
		t.Helper()
		seen := map[*collectorRun]bool{}
		before := map[*collectorRun]int{}
		for _, c := range collectors {
			before[c] = len(c.readExported(t))
		}
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			for _, c := range collectors {
				if !c.proc.Running() {
					return false, fmt.Errorf("collector %s exited: %s\n%s", c.name, c.proc.Exited(), c.proc.Tail(40))
				}
				for _, r := range c.readExported(t)[before[c]:] {
					if r.reason == "Probe" {
						seen[c] = true
					}
				}
			}
			if len(seen) == len(collectors) {
				return true, nil
			}
			create(framework.UniqueName("probe"), "Probe")
			return false, nil
		})
		if err != nil {
			t.Fatalf("the collectors never exported a probe Event: %v", err)
		}
	}
	// drained waits until each collector's file holds every version and end
	// written so far as often as it will export them by now, so that a stop
	// loses nothing buffered.
	drained := func() {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
			for _, c := range collectors {
				added, ended := countExported(t, c.readExported(t))
				for k, p := range versionPhase {
					if added[k] < want(c, p, phase) {
						return false, nil
					}
				}
				for uid, p := range endPhase {
					if ended[uid] < want(c, p, phase) {
						return false, nil
					}
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("the collectors did not export what was written while they ran: %v", err)
		}
	}

	for phase = range phases {
		switch phase {
		case 0:
			watching()
			write("steady-1", "BackOff")
			write("steady-2", "BackOff")
			update("steady-1", 2)
			expire("expiring-1", "expiring-2")
			drained()
		case 1:
			for _, c := range collectors {
				if err := c.proc.Stop(); err != nil {
					t.Fatal(err)
				}
			}
			write("steady-3", "BackOff")
			update("steady-1", 3)
			update("steady-2", 2)
			expire("expiring-3")
		case 2:
			for _, c := range collectors {
				if err := c.proc.Start(); err != nil {
					t.Fatal(err)
				}
			}
			watching()
			update("steady-3", 2)
			write("steady-4", "BackOff")
			expire("expiring-4")
			drained()
		case 3:
			for _, c := range collectors {
				if err := c.proc.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			update("steady-4", 2)
			write("steady-5", "BackOff")
			expire("expiring-5")
		case 4:
			for _, c := range collectors {
				if err := c.proc.Start(); err != nil {
					t.Fatal(err)
				}
			}
			watching()
			update("steady-1", 4)
			write("steady-6", "BackOff")
			expire("expiring-6")
			drained()
		}
	}

	// The feed: every version and end history holds, probes left out,
	// must be exactly what the test wrote.
	feedVersions := map[framework.VersionKey]bool{}
	feedEnds := map[string]bool{}
	for _, r := range framework.ListAllEventRecords(t, raw, ns, "reason!=Probe", 500) {
		k := framework.VersionKey{UID: string(r.Event.UID), RV: r.Event.ResourceVersion}
		feedVersions[k] = true
		if _, ok := versionPhase[k]; !ok {
			t.Errorf("the feed holds version %v (%s) that the test did not write", k, r.Event.Name)
		}
		if !r.Live {
			feedEnds[k.UID] = true
		}
	}
	for k := range versionPhase {
		if !feedVersions[k] {
			t.Errorf("the feed lacks version %v that the test wrote", k)
		}
	}
	for uid := range endPhase {
		if !feedEnds[uid] {
			t.Errorf("the feed lacks the end of Event %s", uid)
		}
	}

	for _, c := range collectors {
		records := c.readExported(t)
		var kept []exportedRecord
		for _, r := range records {
			if r.reason != "Probe" {
				kept = append(kept, r)
			}
		}
		for _, r := range kept {
			if r.attrs["k8s.resource.name"] != "eventrecords" || r.attrs["event.domain"] != "k8s" || r.attrs["event.name"] != r.name ||
				r.name != versionName[r.key]+"."+r.key.RV || r.resource["k8s.namespace.name"] != ns {
				t.Errorf("%s: record %v has attributes %v and resource %v", c.name, r.key, r.attrs, r.resource)
				break
			}
			if (r.watchType == "ADDED") == r.deleted || (r.watchType != "ADDED" && r.watchType != "MODIFIED") {
				t.Errorf("%s: %s of version %v (deleted %v): the feed sends each version ADDED and each end MODIFIED", c.name, r.watchType, r.key, r.deleted)
			}
		}
		added, ended := countExported(t, kept)
		var once, missed, repeated []string
		for k, p := range versionPhase {
			got, want := added[k], want(c, p, len(phases)-1)
			desc := fmt.Sprintf("%s@%s (%s)", versionName[k], k.RV, phases[p].name)
			switch {
			case got == 1:
				once = append(once, desc)
			case got == 0:
				missed = append(missed, desc)
			default:
				repeated = append(repeated, fmt.Sprintf("%s x%d", desc, got))
			}
			if got != want {
				t.Errorf("%s: version %s exported %d times, want %d", c.name, desc, got, want)
			}
		}
		for uid, p := range endPhase {
			if got, want := ended[uid], want(c, p, len(phases)-1); got != want {
				t.Errorf("%s: the end of Event %s (expired while %s) exported %d times, want %d", c.name, uid, phases[p].name, got, want)
			}
		}
		for k := range added {
			if _, ok := versionPhase[k]; !ok {
				t.Errorf("%s: exported version %v that the test did not write", c.name, k)
			}
		}
		sort.Strings(once)
		sort.Strings(missed)
		sort.Strings(repeated)
		t.Logf("%s collector: %d versions exported once, %d missed, %d repeated\n  missed: %s\n  repeated: %s",
			c.name, len(once), len(missed), len(repeated), strings.Join(missed, ", "), strings.Join(repeated, ", "))
	}
}

// countExported counts ADDED records per version and MODIFIED records that
// carry deletedAt (an Event's end) per Event uid.
func countExported(t *testing.T, records []exportedRecord) (added map[framework.VersionKey]int, ended map[string]int) {
	t.Helper()
	added, ended = map[framework.VersionKey]int{}, map[string]int{}
	for _, r := range records {
		if r.reason == "Probe" {
			continue
		}
		switch {
		case r.watchType == "ADDED" && !r.deleted:
			added[r.key]++
		case r.watchType == "MODIFIED" && r.deleted:
			ended[r.key.UID]++
		}
	}
	return added, ended
}
