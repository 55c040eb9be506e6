package timeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyregistry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// timelineBinary is the kubectl-timeline plugin built from the checkout.
func timelineBinary(t *testing.T) string {
	t.Helper()
	path, err := testbed.TimelineBinary()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// timelineEvent is one core/v1 Event about the object kind/name of uid,
// reported by reporter, that happened at at.
func timelineEvent(name, kind, object string, uid types.UID, reason, eventType, reporter string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: object, UID: uid, APIVersion: "v1"},
		Reason:         reason, Message: reason + " of " + string(uid), Type: eventType,
		Source: corev1.EventSource{Component: reporter}, Count: 1,
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
	}
}

// TestTimelinePlugin runs kubectl-timeline as a user does, against a real
// server with history: a pod name borne by three pods over two days, the
// first two gone with their Events (expired with their TTL, or deleted),
// shows as one timeline of three incarnations, oldest first, each Event
// once at its newest version; --since, --types and -A cut it as they say;
// kubectl finds the plugin on PATH; -w prints a new Event as it happens.
func TestTimelinePlugin(t *testing.T) {
	t.Parallel()
	plugin := timelineBinary(t)
	// The first pod's Events expire with their lease after 3s, as every
	// Event does after --event-ttl; the others live the default hour.
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
		"--history-batch-interval=50ms", "--event-ttl-rule=reportingController=expiring-kubelet:3s",
	}})
	client := server.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, otherNS := framework.UniqueName("timeline"), framework.UniqueName("timeline-other")
	uid1, uid2, uid3 := types.UID(framework.UniqueName("web-0-first")), types.UID(framework.UniqueName("web-0-second")), types.UID(framework.UniqueName("web-0-third"))
	now := time.Now().Truncate(time.Second)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }

	create := func(namespace string, e *corev1.Event) *corev1.Event {
		t.Helper()
		e.InvolvedObject.Namespace = namespace
		out, err := client.CoreV1().Events(namespace).Create(ctx, e, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s: %v", e.Name, err)
		}
		return out
	}
	// recur updates an Event as client-go's recorder does when it happens
	// again: a new version with a higher count and lastTimestamp.
	recur := func(e *corev1.Event, count int32, at time.Time) *corev1.Event {
		t.Helper()
		e = e.DeepCopy()
		e.Count, e.LastTimestamp = count, metav1.NewTime(at)
		out, err := client.CoreV1().Events(e.Namespace).Update(ctx, e, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("updating %s: %v", e.Name, err)
		}
		return out
	}

	// The first pod, 30 hours ago: its Events expire.
	create(ns, timelineEvent("web-0.1-scheduled", "Pod", "web-0", uid1, "Scheduled", "Normal", "expiring-kubelet", ago(30*time.Hour)))
	killing := create(ns, timelineEvent("web-0.1-killing", "Pod", "web-0", uid1, "Killing", "Normal", "expiring-kubelet", ago(29*time.Hour)))
	recur(killing, 2, ago(29*time.Hour-time.Minute))
	// The second, 20 hours ago: its Events are deleted.
	scheduled2 := create(ns, timelineEvent("web-0.2-scheduled", "Pod", "web-0", uid2, "Scheduled", "Normal", "kubelet", ago(20*time.Hour)))
	backoff := create(ns, timelineEvent("web-0.2-backoff", "Pod", "web-0", uid2, "BackOff", "Warning", "kubelet", ago(19*time.Hour)))
	recur(backoff, 3, ago(18*time.Hour))
	for _, name := range []string{scheduled2.Name, backoff.Name} {
		if err := client.CoreV1().Events(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The third, an hour ago, still live.
	create(ns, timelineEvent("web-0.3-scheduled", "Pod", "web-0", uid3, "Scheduled", "Normal", "kubelet", ago(time.Hour)))
	started := create(ns, timelineEvent("web-0.3-started", "Pod", "web-0", uid3, "Started", "Normal", "kubelet", ago(50*time.Minute)))
	recur(started, 2, ago(40*time.Minute))
	// Not on the timeline: another pod, another kind of the same name, and
	// (unless -A) a web-0 in another namespace.
	create(ns, timelineEvent("web-1.scheduled", "Pod", "web-1", "web-1-uid", "Scheduled", "Normal", "kubelet", ago(time.Hour)))
	create(ns, timelineEvent("web-0.svc", "Service", "web-0", "svc-uid", "Created", "Normal", "service-controller", ago(time.Hour)))
	create(otherNS, timelineEvent("web-0.other", "Pod", "web-0", "other-uid", "Scheduled", "Normal", "kubelet", ago(2*time.Hour)))

	// Wait until the first pod's Events have expired and history holds
	// every version of web-0's Events (3 a pod), the first two pods' as
	// deleted: then the live API has only the third pod's, and the
	// timeline must come from both sources.
	c := framework.AdminRawClient(t, server)
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, time.Minute, true, func(ctx context.Context) (bool, error) {
		live, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid1)})
		if err != nil || len(live.Items) > 0 {
			return false, err
		}
		records := framework.ListAllEventRecords(t, c, ns, "regarding.kind=Pod,regarding.name=web-0", 0)
		if len(records) != 9 {
			return false, nil
		}
		for _, r := range records {
			if gone := r.Event.Regarding.UID != uid3; gone != (r.DeletedAt != nil) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for the first pod's Events to expire and history to hold all 9 versions: %v", err)
	}

	run := func(args ...string) (string, string) {
		t.Helper()
		stdout, stderr, err := framework.KubectlAt(t, plugin, server.Kubeconfig, nil, args...)
		if err != nil {
			t.Fatalf("kubectl-timeline %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout, stderr
	}
	timeline := func(args ...string) historyv1alpha1.EventRecordList {
		t.Helper()
		stdout, _ := run(append(args, "-o", "json")...)
		var list historyv1alpha1.EventRecordList
		if err := json.Unmarshal([]byte(stdout), &list); err != nil {
			t.Fatalf("kubectl-timeline %s -o json: %v\n%s", strings.Join(args, " "), err, stdout)
		}
		if list.Kind != "EventRecordList" || list.APIVersion != historyv1alpha1.SchemeGroupVersion.String() {
			t.Errorf("-o json printed a %s %s, want an EventRecordList", list.APIVersion, list.Kind)
		}
		return list
	}
	// story is each record as uid/reason/count/live, in timeline order.
	story := func(list historyv1alpha1.EventRecordList) []string {
		out := []string{}
		for _, r := range list.Items {
			out = append(out, fmt.Sprintf("%s/%s/x%d/live=%v", r.Event.Regarding.UID, r.Event.Reason, r.Event.DeprecatedCount, r.Live))
		}
		return out
	}
	whole := []string{
		string(uid1) + "/Scheduled/x1/live=false",
		string(uid1) + "/Killing/x2/live=false",
		string(uid2) + "/Scheduled/x1/live=false",
		string(uid2) + "/BackOff/x3/live=false",
		string(uid3) + "/Scheduled/x1/live=true",
		string(uid3) + "/Started/x2/live=true",
	}
	assertStory := func(name string, got historyv1alpha1.EventRecordList, want []string) {
		t.Helper()
		if strings.Join(story(got), "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: timeline\n  %s\nwant\n  %s", name, strings.Join(story(got), "\n  "), strings.Join(want, "\n  "))
		}
	}

	t.Run("three incarnations, oldest first, each Event once", func(t *testing.T) {
		list := timeline("pod/web-0", "-n", ns)
		assertStory("pod/web-0", list, whole)
		// Both sources followed page by page: continue tokens, and each
		// Event once although its versions span pages.
		assertStory("pod/web-0 in pages of one", timeline("pod/web-0", "-n", ns, "--chunk-size=1"), whole)
		for i := 1; i < len(list.Items); i++ {
			if list.Items[i].LastSeen.Before(&list.Items[i-1].LastSeen) {
				t.Errorf("records %d and %d not oldest first: %s, %s", i-1, i, list.Items[i-1].LastSeen, list.Items[i].LastSeen)
			}
		}
		for _, r := range list.Items {
			if r.Kind != "EventRecord" || r.Event.ManagedFields != nil {
				t.Errorf("record %s: kind %q, managedFields %d; want EventRecord without managedFields", r.Name, r.Kind, len(r.Event.ManagedFields))
			}
		}
	})

	t.Run("table", func(t *testing.T) {
		stdout, stderr := run("pod/web-0", "-n", ns)
		if stderr != "" {
			t.Errorf("stderr: %s", stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if got := strings.Join(strings.Fields(lines[0]), " "); got != "FIRST SEEN LAST SEEN TYPE REASON COUNT REPORTER UID MESSAGE" {
			t.Errorf("header %q", lines[0])
		}
		if len(lines) != 1+len(whole) {
			t.Fatalf("%d rows, want %d:\n%s", len(lines)-1, len(whole), stdout)
		}
		for i, want := range whole {
			parts := strings.Split(want, "/")
			if row := lines[i+1]; !strings.Contains(row, " "+parts[0]+" ") || !strings.Contains(row, " "+parts[1]+" ") {
				t.Errorf("row %d = %q, want uid %s and reason %s", i+1, row, parts[0], parts[1])
			}
		}
		wide, _ := run("pod/web-0", "-n", ns, "-o", "wide")
		if !strings.Contains(wide, "web-0.1-killing") || strings.Count(wide, " deleted ") != 4 || strings.Count(wide, " live ") != 2 {
			t.Errorf("-o wide does not show each Event's name and state:\n%s", wide)
		}
	})

	t.Run("since cuts it", func(t *testing.T) {
		assertStory("--since=24h", timeline("pod/web-0", "-n", ns, "--since=24h"), whole[2:])
		assertStory("--since=10h", timeline("pod/web-0", "-n", ns, "--since=10h"), whole[4:])
		_, stderr := run("pod/web-0", "-n", ns, "--since=1m")
		if !strings.Contains(stderr, "No events found for Pod/web-0 in "+ns+" namespace.") {
			t.Errorf("--since=1m: stderr %q", stderr)
		}
	})

	t.Run("types and all namespaces", func(t *testing.T) {
		assertStory("--types=warning", timeline("po/web-0", "-n", ns, "--types=warning"), whole[3:4])
		// The other namespace's web-0, two hours ago, between the second
		// pod and the third.
		all := timeline("pods/web-0", "-A")
		assertStory("-A", all, append(append(append([]string{}, whole[:4]...), "other-uid/Scheduled/x1/live=true"), whole[4:]...))
		stdout, _ := run("pod/web-0", "-A")
		if !strings.HasPrefix(stdout, "NAMESPACE ") || !strings.Contains(stdout, otherNS) {
			t.Errorf("-A table has no namespace column:\n%s", stdout)
		}
	})

	t.Run("kubectl runs it as a plugin", func(t *testing.T) {
		path := "PATH=" + filepath.Dir(plugin) + string(os.PathListSeparator) + os.Getenv("PATH")
		stdout, stderr, err := framework.KubectlWithEnv(t, server.Kubeconfig, []string{path}, "timeline", "pod/web-0", "-n", ns, "-o", "json")
		var list historyv1alpha1.EventRecordList
		if err != nil || json.Unmarshal([]byte(stdout), &list) != nil {
			t.Fatalf("kubectl timeline: %v\n%s\n%s", err, stdout, stderr)
		}
		assertStory("kubectl timeline", list, whole)
	})

	t.Run("watch prints a new Event as it happens", func(t *testing.T) {
		testTimelineWatch(t, plugin, server, client, ns, uid3)
	})
}

// testTimelineWatch starts `kubectl-timeline -w`, waits for the timeline,
// then creates an Event, updates it and deletes it, and creates one that
// expires with its TTL, and measures how long each takes to be printed.
// With history installed, -w follows history's feed, so the two ends are
// printed too, in the STATE column -w adds.
func testTimelineWatch(t *testing.T, plugin string, server *framework.Server, client kubernetes.Interface, ns string, uid types.UID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := startTimelineWatch(t, ctx, plugin, server.Kubeconfig, "pod/web-0", "-n", ns, "-w", "--since=2h")
	// waitFor reads printed rows until one shows reason with count, and
	// with ended, a STATE of deleted.
	waitFor := func(reason, count string, ended bool) time.Time {
		t.Helper()
		return w.waitFor(t, fmt.Sprintf("%s x%s (ended %v)", reason, count, ended), func(line string) bool {
			if strings.HasPrefix(line, "FIRST SEEN") && !strings.Contains(line, " STATE ") {
				t.Errorf("-w following history prints no STATE column: %q", line)
			}
			// FIRST SEEN, LAST SEEN, TYPE, REASON, COUNT, REPORTER, UID,
			// STATE (live, or deleted <age> ago), MESSAGE.
			f := strings.Fields(line)
			return len(f) > 7 && f[3] == reason && f[4] == count && (f[7] == "deleted") == ended
		})
	}
	waitFor("Started", "2", false)

	event := timelineEvent("web-0.3-unhealthy", "Pod", "web-0", uid, "Unhealthy", "Warning", "kubelet", time.Now())
	event.InvolvedObject.Namespace = ns
	created := time.Now()
	event, err := client.CoreV1().Events(ns).Create(ctx, event, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	printed := waitFor("Unhealthy", "1", false)
	t.Logf("a new Event was printed %v after its create was sent", printed.Sub(created))

	event.Count, event.LastTimestamp = 2, metav1.Now()
	updated := time.Now()
	if _, err := client.CoreV1().Events(ns).Update(ctx, event, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	printed = waitFor("Unhealthy", "2", false)
	t.Logf("its next occurrence was printed %v after the update was sent", printed.Sub(updated))

	deleted := time.Now()
	if err := client.CoreV1().Events(ns).Delete(ctx, event.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	printed = waitFor("Unhealthy", "2", true)
	t.Logf("its delete was printed %v after it was sent", printed.Sub(deleted))

	// expiring-kubelet's Events live 3s (the server's --event-ttl-rule).
	expiring := timelineEvent("web-0.3-pulled", "Pod", "web-0", uid, "Pulled", "Normal", "expiring-kubelet", time.Now())
	expiring.InvolvedObject.Namespace = ns
	expiringCreated := time.Now()
	if _, err := client.CoreV1().Events(ns).Create(ctx, expiring, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("Pulled", "1", false)
	waitFor("Pulled", "1", true)
	t.Logf("an Event with a 3s TTL was printed as ended %v after its create was sent", time.Since(expiringCreated))

	w.interrupt(t)
}

// timelineWatch is a running `kubectl-timeline -w` and the rows it prints.
type timelineWatch struct {
	cmd    *exec.Cmd
	stderr *strings.Builder
	lines  chan string
}

func startTimelineWatch(t *testing.T, ctx context.Context, plugin, kubeconfig string, args ...string) *timelineWatch {
	t.Helper()
	cmd := exec.CommandContext(ctx, plugin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "KUBECACHEDIR="+filepath.Join(filepath.Dir(kubeconfig), "kubectl-cache"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &timelineWatch{cmd: cmd, stderr: &strings.Builder{}, lines: make(chan string, 100)}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			w.lines <- scanner.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return w
}

// waitFor reads printed rows until one matches, and returns when it came.
// The 20s bound only ends a test that would otherwise hang; the delays
// are reported, not asserted.
func (w *timelineWatch) waitFor(t *testing.T, what string, match func(line string) bool) time.Time {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				t.Fatalf("kubectl-timeline -w exited before printing %s: %v\nstderr: %s", what, w.cmd.Wait(), w.stderr.String())
			}
			if match(line) {
				return time.Now()
			}
		case <-timeout:
			t.Fatalf("kubectl-timeline -w did not print %s within 20s; stderr: %s", what, w.stderr.String())
		}
	}
}

// interrupt ends the watch as Ctrl-C does, which must exit cleanly.
func (w *timelineWatch) interrupt(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("kubectl-timeline -w after Ctrl-C: %v; stderr: %s", err, w.stderr.String())
	}
}

// TestTimelineWithoutHistory: against a server without history, the plugin
// says so on stderr and shows the live Events.
func TestTimelineWithoutHistory(t *testing.T) {
	t.Parallel()
	plugin := timelineBinary(t)
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{"--history=false"}})
	client := server.Client(t)
	ns := framework.UniqueName("timeline-nohistory")
	e := timelineEvent("web-0.scheduled", "Pod", "web-0", "uid-live", "Scheduled", "Normal", "kubelet", time.Now().Add(-time.Minute))
	e.InvolvedObject.Namespace = ns
	if _, err := client.CoreV1().Events(ns).Create(context.Background(), e, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := framework.KubectlAt(t, plugin, server.Kubeconfig, nil, "pod/web-0", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl-timeline: %v\n%s\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stderr, "history is not installed on this server") || !strings.Contains(stderr, historyregistry.OffMessage) ||
		!strings.Contains(stderr, "showing live Events only") {
		t.Errorf("stderr does not say history is off and how to turn it on: %q", stderr)
	}
	// The API itself says how to turn history on.
	if _, stderr, err := framework.Kubectl(t, server.Kubeconfig, "get", "eventrecords", "-n", ns); err == nil ||
		!strings.Contains(stderr, "Error from server (NotFound)") || !strings.Contains(stderr, historyregistry.OffMessage) {
		t.Errorf("kubectl get eventrecords with history off: %v, stderr %q", err, stderr)
	}
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "Scheduled") || !strings.Contains(lines[1], "uid-live") {
		t.Errorf("stdout does not show the live Event:\n%s", stdout)
	}
	// --cluster reads history alone: the live Events cannot say whose they are.
	if out, errOut, err := framework.KubectlAt(t, plugin, server.Kubeconfig, nil, "pod/web-0", "-n", ns, "--cluster=kubernetes"); err == nil ||
		!strings.Contains(errOut, "--cluster reads history: history is not installed on this server") || strings.Contains(out, "Scheduled") {
		t.Errorf("kubectl timeline --cluster without history: %v\n%s\n%s", err, out, errOut)
	}

	// -w follows the live Events instead of history's feed.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := startTimelineWatch(t, ctx, plugin, server.Kubeconfig, "pod/web-0", "-n", ns, "-w")
	w.waitFor(t, "the live Event", func(line string) bool { return strings.Contains(line, "Scheduled") })
	next := timelineEvent("web-0.pulled", "Pod", "web-0", "uid-live", "Pulled", "Normal", "kubelet", time.Now())
	next.InvolvedObject.Namespace = ns
	created := time.Now()
	if _, err := client.CoreV1().Events(ns).Create(ctx, next, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	printed := w.waitFor(t, "the new Event", func(line string) bool { return strings.Contains(line, "Pulled") })
	t.Logf("without history, a new Event was printed %v after its create was sent", printed.Sub(created))
	w.interrupt(t)
}
