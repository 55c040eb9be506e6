package cluster_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eventapiserver/event-apiserver/internal/cluster"
)

// guidePath is the install guide whose marked blocks TestGuideInstall runs.
const guidePath = "docs/aggregated.md"

const (
	blockMarker    = "<!-- e2e -->"
	settingsMarker = "<!-- e2e settings -->"
)

// The host directories the guide's blocks create outside /etc/kubernetes
// (which the cluster removes): the static pod's data and the PostgreSQL
// PersistentVolume.
var guideHostDirs = []string{"/var/lib/events-etcd", "/var/lib/event-apiserver-postgres"}

// settingsEnd separates a settings block's output from its values.
const settingsEnd = "--- e2e settings ---"

// guideBlock is one shell block of the guide, marked to be run.
type guideBlock struct {
	// file is the guide's path, for messages.
	file     string
	line     int
	text     string
	settings bool
}

// guideBlocks are the guide's marked ```sh blocks, in order.
func guideBlocks(path string) ([]guideBlock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	var blocks []guideBlock
	for i := 0; i < len(lines); i++ {
		marker := strings.TrimSpace(lines[i])
		if marker != blockMarker && marker != settingsMarker {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "```sh" {
			return nil, fmt.Errorf("%s:%d: %s is not followed by a ```sh block", path, i+1, marker)
		}
		end := i + 2
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: the block never ends", path, i+2)
		}
		blocks = append(blocks, guideBlock{file: filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path), line: i + 2, text: strings.Join(lines[i+2:end], "\n"), settings: marker == settingsMarker})
		i = end
	}
	return blocks, nil
}

// runGuide runs each block with bash in dir, as an operator pastes them
// into one shell: the variables a settings block sets keep the values they
// got when it ran. It stops the test at the first block that fails, with
// the block and its output.
func runGuide(t *testing.T, ctx context.Context, c *cluster.Cluster, dir string, blocks []guideBlock) {
	t.Helper()
	var settings strings.Builder
	for _, b := range blocks {
		start := time.Now()
		script := "set -e -o pipefail\n" + settings.String() + b.text + "\n"
		if b.settings {
			script += "echo " + settingsEnd + "\ndeclare -p " + strings.Join(assignedNames(b.text), " ") + "\n"
		}
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		cmd := exec.CommandContext(bctx, "bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = c.Env()
		// The blocks' loops (until curl ...) run children: end them all.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s:%d: the guide's block failed after %s: %v\n--- block:\n%s\n--- output:\n%s", b.file, b.line, time.Since(start).Round(time.Second), err, b.text, out)
		}
		t.Logf("%s:%d: ran in %s: %s", b.file, b.line, time.Since(start).Round(100*time.Millisecond), firstLine(b.text))
		if b.settings {
			// declare -p prints the values as assignments, quoted.
			_, values, ok := bytes.Cut(out, []byte(settingsEnd+"\n"))
			if !ok {
				t.Fatalf("%s:%d: the settings block printed no values: %s", b.file, b.line, out)
			}
			settings.Write(values)
		}
	}
}

// assignedNames are the variables a settings block assigns, one NAME=value
// a line.
func assignedNames(block string) []string {
	var names []string
	for _, line := range strings.Split(block, "\n") {
		if name, _, ok := strings.Cut(line, "="); ok && name != "" && !strings.ContainsAny(name, " $\t") {
			names = append(names, name)
		}
	}
	return names
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// guideDir is a copy of the checkout's deploy/ with _output linked in: the
// blocks write their kustomizations under deploy/local/ without touching
// the checkout.
func guideDir(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "deploy", "local")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "_output"), filepath.Join(dir, "_output")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func removeGuideHostDirs(t *testing.T) {
	for _, d := range guideHostDirs {
		if err := os.RemoveAll(d); err != nil {
			t.Errorf("removing %s: %v", d, err)
		}
	}
}

// TestGuideInstall installs event-apiserver on the real cluster by running
// docs/aggregated.md's marked blocks as they are written (static-pod events
// etcd, kube-apiserver's override and probes, the aggregated overlay with
// history in the in-cluster PostgreSQL), then checks what the guide
// promises: the kubelet's and the scheduler's Events through both APIs,
// `kubectl describe`, `kubectl events` and `eventrecords`; history that
// survives a rollout restart and is the same on every replica; and an
// events etcd outage of two minutes that restarts nothing, during which
// rv=0 lists and history answer and writes get 503 with Retry-After, and
// after which everything works again by itself.
func TestGuideInstall(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := guideBlocks(filepath.Join(root, guidePath))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s marks no blocks", guidePath)
	}
	if _, err := os.Stat(filepath.Join(root, "_output", "image", "postgres.tar")); err != nil {
		t.Fatalf("%v: run hack/build-cluster-images.sh", err)
	}
	// After the cluster stops (cleanups run last-registered first), and
	// before it starts: a crashed run's etcd data would not match.
	t.Cleanup(func() { removeGuideHostDirs(t) })
	removeGuideHostDirs(t)
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	installStart := time.Now()
	runGuide(t, ctx, c, guideDir(t, root), blocks)
	t.Logf("the guide's %d blocks ran in %s", len(blocks), time.Since(installStart).Round(time.Second))
	if svc := mustKubectl(t, ctx, c, "get", "apiservice", "v1.events.k8s.io", "-o", "jsonpath={.spec.service.namespace}/{.spec.service.name}"); svc != "event-apiserver/event-apiserver" {
		t.Fatalf("APIService v1.events.k8s.io is served by %q, want event-apiserver/event-apiserver", svc)
	}

	mustKubectl(t, ctx, c, "create", "namespace", "e2e")
	mustKubectl(t, ctx, c, "create", "namespace", "e2e-history")
	mustKubectl(t, ctx, c, "-n", "e2e", "create", "deployment", "web", "--image=registry.k8s.io/pause:3.10.2", "--replicas=2")
	mustKubectl(t, ctx, c, "-n", "e2e-history", "create", "deployment", "gone", "--image=registry.k8s.io/pause:3.10.2", "--replicas=2")
	mustKubectl(t, ctx, c, "-n", "e2e", "rollout", "status", "deployment/web", "--timeout=3m")
	mustKubectl(t, ctx, c, "-n", "e2e-history", "rollout", "status", "deployment/gone", "--timeout=3m")

	t.Run("events", func(t *testing.T) {
		checkPodEvents(t, ctx, c, "e2e", "app=web")
		waitHistory(t, ctx, c, "e2e", "web-", "Scheduled", "Started")
	})
	if t.Failed() {
		return
	}
	var restart rolloutRestart
	t.Run("history across a rollout restart", func(t *testing.T) { restart = testHistoryRollout(t, ctx, c) })
	t.Run("quiet starts", func(t *testing.T) { testQuietStarts(t, ctx, c, restart) })
	t.Run("events etcd outage", func(t *testing.T) { testEventsEtcdOutage(t, ctx, c) })
}

// eventRecords is what `kubectl get eventrecords -o json` says of each
// record: name, reason, regarding and whether the Event was deleted.
type eventRecords struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Event struct {
			Reason    string `json:"reason"`
			Regarding struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"regarding"`
		} `json:"event"`
		DeletedAt *string `json:"deletedAt"`
	} `json:"items"`
}

// reasonsFor are the reasons of the records about pods named with prefix.
func (r eventRecords) reasonsFor(podPrefix string) map[string]bool {
	reasons := map[string]bool{}
	for _, it := range r.Items {
		if it.Event.Regarding.Kind == "Pod" && strings.HasPrefix(it.Event.Regarding.Name, podPrefix) {
			reasons[it.Event.Reason] = true
		}
	}
	return reasons
}

// key is the answer's identity, to compare replicas: every record's name
// and whether it is deleted, sorted.
func (r eventRecords) key() string {
	var names []string
	for _, it := range r.Items {
		names = append(names, fmt.Sprintf("%s deleted=%t", it.Metadata.Name, it.DeletedAt != nil))
	}
	sort.Strings(names)
	return strings.Join(names, "\n")
}

func getEventRecords(ctx context.Context, c *cluster.Cluster, ns string) (eventRecords, error) {
	var r eventRecords
	out, err := kubectl(ctx, c, "-n", ns, "get", "eventrecords", "--field-selector=since=1h", "-o", "json")
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal([]byte(out), &r)
}

// waitHistory waits until `kubectl get eventrecords` in ns holds each reason
// for the pods named with podPrefix.
func waitHistory(t *testing.T, ctx context.Context, c *cluster.Cluster, ns, podPrefix string, reasons ...string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := getEventRecords(ctx, c, ns)
		if err != nil {
			last = err
			return false, nil
		}
		got := r.reasonsFor(podPrefix)
		for _, reason := range reasons {
			if !got[reason] {
				last = fmt.Errorf("no %s record for pods %s* (have %v)", reason, podPrefix, got)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("kubectl get eventrecords -n %s: %v (last: %v)", ns, err, last)
	}
}

// replicaClients are clients of each running event-apiserver replica,
// straight to its pod IP (the node routes the pod network), as the admin
// (event-apiserver authenticates kube-apiserver's client CA's
// certificates), trusting the CA of the APIService's caBundle.
func replicaClients(t *testing.T, ctx context.Context, c *cluster.Cluster) map[string]replica {
	t.Helper()
	caBundle, err := base64.StdEncoding.DecodeString(mustKubectl(t, ctx, c, "get", "apiservice", "v1alpha1.history.eventapiserver.io", "-o", "jsonpath={.spec.caBundle}"))
	if err != nil {
		t.Fatal(err)
	}
	out := mustKubectl(t, ctx, c, "-n", "event-apiserver", "get", "pods", "-l", "app=event-apiserver", "--field-selector=status.phase=Running", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.podIP}{"\n"}{end}`)
	clients := map[string]replica{}
	for _, line := range strings.Fields(out) {
		name, ip, _ := strings.Cut(line, "=")
		cfg := adminConfig(t)
		cfg.Host = "https://" + ip + ":6443"
		cfg.CAFile, cfg.CAData = "", caBundle
		cfg.ServerName = "event-apiserver.event-apiserver.svc"
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = replica{hc: hc, host: cfg.Host}
	}
	return clients
}

func adminConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 30 * time.Second
	return cfg
}

// historyOnEveryReplica is each replica's answer for ns's records.
func historyOnEveryReplica(ctx context.Context, clients map[string]replica, ns string) (map[string]eventRecords, error) {
	answers := map[string]eventRecords{}
	for name, rc := range clients {
		body, err := rc.get(ctx, "/apis/history.eventapiserver.io/v1alpha1/namespaces/"+ns+"/eventrecords?fieldSelector=since%3D1h")
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", name, err)
		}
		var r eventRecords
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, fmt.Errorf("replica %s: %w", name, err)
		}
		answers[name] = r
	}
	return answers, nil
}

// sameHistory waits until every replica answers the same non-empty history
// for ns that holds the deleted Events of the pods named with podPrefix.
func sameHistory(t *testing.T, ctx context.Context, c *cluster.Cluster, ns, podPrefix string) string {
	t.Helper()
	var last error
	var agreed string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		clients := replicaClients(t, ctx, c)
		if len(clients) < 2 {
			last = fmt.Errorf("%d replicas running, want 2", len(clients))
			return false, nil
		}
		answers, err := historyOnEveryReplica(ctx, clients, ns)
		if err != nil {
			last = err
			return false, nil
		}
		keys := map[string][]string{}
		for name, r := range answers {
			if reasons := r.reasonsFor(podPrefix); !reasons["Scheduled"] || !reasons["Started"] {
				last = fmt.Errorf("replica %s: no Scheduled and Started records for pods %s* (have %v)", name, podPrefix, reasons)
				return false, nil
			}
			for _, it := range r.Items {
				if it.DeletedAt == nil {
					last = fmt.Errorf("replica %s: record %s not marked deleted", name, it.Metadata.Name)
					return false, nil
				}
			}
			keys[r.key()] = append(keys[r.key()], name)
		}
		if len(keys) != 1 {
			last = fmt.Errorf("replicas disagree: %v", keys)
			return false, nil
		}
		for k := range keys {
			agreed = k
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("history of %s on every replica: %v (last: %v)", ns, err, last)
	}
	return agreed
}

// testHistoryRollout deletes a Deployment and every Event of its namespace
// (so that they live only in history), then restarts every event-apiserver
// replica: the new replicas, with fresh emptyDirs, answer the same records
// as the old ones did, each the same.
func testHistoryRollout(t *testing.T, ctx context.Context, c *cluster.Cluster) rolloutRestart {
	waitHistory(t, ctx, c, "e2e-history", "gone-", "Scheduled", "Started")
	mustKubectl(t, ctx, c, "-n", "e2e-history", "delete", "deployment", "gone", "--wait=true")
	mustKubectl(t, ctx, c, "-n", "e2e-history", "wait", "--for=delete", "pods", "-l", "app=gone", "--timeout=2m")
	mustKubectl(t, ctx, c, "-n", "e2e-history", "delete", "events", "--all")
	if out := mustKubectl(t, ctx, c, "-n", "e2e-history", "get", "events.events.k8s.io", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("Events left in e2e-history after deleting them all: %s", out)
	}
	before := sameHistory(t, ctx, c, "e2e-history", "gone-")
	oldPods := mustKubectl(t, ctx, c, "-n", "event-apiserver", "get", "pods", "-l", "app=event-apiserver", "-o", "jsonpath={.items[*].metadata.name}")

	restart := rolloutRestart{oldPods: map[string]bool{}, at: time.Now().Truncate(time.Second)}
	for _, old := range strings.Fields(oldPods) {
		restart.oldPods[old] = true
	}
	mustKubectl(t, ctx, c, "-n", "event-apiserver", "rollout", "restart", "deployment/event-apiserver")
	mustKubectl(t, ctx, c, "-n", "event-apiserver", "rollout", "status", "deployment/event-apiserver", "--timeout=5m")
	// rollout status returns once the new replicas are available; the old
	// ones may still be terminating.
	for _, old := range strings.Fields(oldPods) {
		if _, err := kubectl(ctx, c, "-n", "event-apiserver", "wait", "--for=delete", "pod/"+old, "--timeout=2m"); err != nil {
			t.Fatal(err)
		}
	}
	after := sameHistory(t, ctx, c, "e2e-history", "gone-")
	if after != before {
		t.Errorf("history of e2e-history changed across the rollout restart:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Through kube-apiserver too.
	r, err := getEventRecords(ctx, c, "e2e-history")
	if err != nil {
		t.Fatal(err)
	}
	if r.key() != after {
		t.Errorf("kubectl get eventrecords -n e2e-history through kube-apiserver:\n%s\nwant, as every replica:\n%s", r.key(), after)
	}
	return restart
}

// rolloutRestart is when `kubectl rollout restart` was run and the pods it
// replaced.
type rolloutRestart struct {
	at      time.Time
	oldPods map[string]bool
}

// kubeAPIServerContainer is kube-apiserver's container ID and restart count.
func kubeAPIServerContainer(t *testing.T, ctx context.Context, c *cluster.Cluster) string {
	t.Helper()
	return mustKubectl(t, ctx, c, "-n", "kube-system", "get", "pod", "kube-apiserver-"+c.NodeName(), "-o", "jsonpath={.status.containerStatuses[0].containerID} restarts={.status.containerStatuses[0].restartCount}")
}

// writeEvent posts an events.k8s.io/v1 Event through kube-apiserver, with
// no retries, and returns the status code and the Retry-After header.
func writeEvent(ctx context.Context, hc *http.Client, host string) (int, string, string, error) {
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	body := fmt.Sprintf(`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"generateName":"outage-"},"eventTime":%q,"reportingController":"e2e.eventapiserver.io/guide","reportingInstance":"guide-test","action":"Check","reason":"OutageCheck","type":"Normal","note":"written during the guide test","regarding":{"apiVersion":"v1","kind":"Pod","namespace":"e2e","name":"outage-check"}}`, now)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, host+"/apis/events.k8s.io/v1/namespaces/e2e/events", bytes.NewBufferString(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(msg), nil
}

// testEventsEtcdOutage stops the events etcd for two minutes the way an
// operator would, by moving its static pod's manifest out of the kubelet's
// directory, and back.
func testEventsEtcdOutage(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	const manifest = "/etc/kubernetes/manifests/events-etcd.yaml"
	parked := filepath.Join(c.Dir(), "events-etcd.yaml")
	cfg := adminConfig(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, msg, err := writeEvent(ctx, hc, cfg.Host); err != nil || code != http.StatusCreated {
		t.Fatalf("writing an Event before the outage: %d %v %s", code, err, msg)
	}
	apiserverBefore := kubeAPIServerContainer(t, ctx, c)

	if err := os.Rename(manifest, parked); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := os.Rename(parked, manifest); err != nil {
				t.Errorf("putting the events etcd's manifest back: %v", err)
			}
		}
	}
	defer restore()
	stopped := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return exec.CommandContext(ctx, "curl", "-fsS", "--max-time", "2", "http://127.0.0.1:2384/readyz").Run() != nil, nil
	}); err != nil {
		t.Fatalf("the events etcd still answers after its manifest was moved away: %v", err)
	}
	t.Logf("the events etcd stopped %s after its manifest was moved", time.Since(stopped).Round(time.Second))

	// Writes fail fast once the server has seen etcd go; until then one may
	// wait for its request timeout.
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		code, retryAfter, msg, err := writeEvent(ctx, hc, cfg.Host)
		last = fmt.Sprintf("%d Retry-After=%q %v %s", code, retryAfter, err, msg)
		return err == nil && code == http.StatusServiceUnavailable && retryAfter != "", nil
	}); err != nil {
		t.Fatalf("an Event write during the outage: want 503 with Retry-After, last %s", last)
	}
	// One replica replaced during the outage: its successor starts with the
	// events etcd down, and must stay up (no restart by its probes) until
	// the etcd is back, while the other serves.
	before := strings.Fields(mustKubectl(t, ctx, c, "-n", "event-apiserver", "get", "pods", "-l", "app=event-apiserver", "-o", "jsonpath={.items[*].metadata.name}"))
	mustKubectl(t, ctx, c, "-n", "event-apiserver", "delete", "pod", before[0], "--wait=false")

	checks := 0
	for time.Since(stopped) < 2*time.Minute {
		checks++
		code, retryAfter, msg, err := writeEvent(ctx, hc, cfg.Host)
		if err != nil || code != http.StatusServiceUnavailable || retryAfter == "" {
			t.Errorf("write %s into the outage: %d Retry-After=%q %v %s", time.Since(stopped).Round(time.Second), code, retryAfter, err, msg)
		}
		out, err := kubectl(ctx, c, "get", "--raw", "/apis/events.k8s.io/v1/namespaces/e2e/events?resourceVersion=0")
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err == nil {
			err = json.Unmarshal([]byte(out), &list)
		}
		if err != nil || len(list.Items) == 0 {
			t.Errorf("rv=0 list %s into the outage: %d items, %v", time.Since(stopped).Round(time.Second), len(list.Items), err)
		}
		r, err := getEventRecords(ctx, c, "e2e")
		if err != nil || !r.reasonsFor("web-")["Scheduled"] {
			t.Errorf("kubectl get eventrecords %s into the outage: %v (Scheduled for web-*: %t)", time.Since(stopped).Round(time.Second), err, err == nil && r.reasonsFor("web-")["Scheduled"])
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Second):
		}
	}
	t.Logf("%d rounds of checks during the %s outage", checks, time.Since(stopped).Round(time.Second))
	restore()
	back := time.Now()

	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		code, retryAfter, msg, err := writeEvent(ctx, hc, cfg.Host)
		last = fmt.Sprintf("%d Retry-After=%q %v %s", code, retryAfter, err, msg)
		return err == nil && code == http.StatusCreated, nil
	}); err != nil {
		t.Fatalf("Event writes after the events etcd came back: last %s", last)
	}
	t.Logf("Event writes succeed again %s after the manifest was put back", time.Since(back).Round(time.Second))
	mustKubectl(t, ctx, c, "wait", "--for=condition=Available", "--timeout=2m", "apiservice/v1.events.k8s.io", "apiservice/v1alpha1.history.eventapiserver.io")
	checkStartedDuringOutage(t, ctx, c, before, back)
	// kube-apiserver's own etcd client for the override reconnects on its
	// schedule, later than event-apiserver's: one clean run saw its first
	// core/v1 list time out after the writes above were back.
	for _, resource := range []string{"events", "events.events.k8s.io"} {
		if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			out, err := kubectl(ctx, c, "-n", "e2e", "get", resource)
			last = out
			return err == nil, nil
		}); err != nil {
			t.Fatalf("kubectl -n e2e get %s after the events etcd came back: %s", resource, last)
		}
	}
	if after := kubeAPIServerContainer(t, ctx, c); after != apiserverBefore {
		t.Errorf("kube-apiserver was restarted by the outage: before %s, after %s", apiserverBefore, after)
	}
}

// replica is a client of one event-apiserver replica.
type replica struct {
	hc   *http.Client
	host string
}

func (r replica) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.host+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}

// testQuietStarts checks that no event-apiserver pod, of the install or of
// the rollout restart, failed a probe while starting or running (an
// Unhealthy Event): the startupProbe waits for what readiness checks, and
// its first probe comes after the measured start. Allowed, and logged: a
// replaced pod's readiness failing while it terminates. On SIGTERM /readyz
// fails its "shutdown" check for --shutdown-delay-duration, as
// kube-apiserver's does, and then the listener closes a few seconds before
// the process exits. It logs how long each running replica took from its
// container's start to Ready.
func testQuietStarts(t *testing.T, ctx context.Context, c *cluster.Cluster, restart rolloutRestart) {
	var events struct {
		Items []struct {
			InvolvedObject struct {
				Name string `json:"name"`
			} `json:"involvedObject"`
			Message        string `json:"message"`
			Count          int    `json:"count"`
			FirstTimestamp string `json:"firstTimestamp"`
			LastTimestamp  string `json:"lastTimestamp"`
		} `json:"items"`
	}
	out := mustKubectl(t, ctx, c, "-n", "event-apiserver", "get", "events", "--field-selector=reason=Unhealthy,involvedObject.kind=Pod", "-o", "json")
	if err := json.Unmarshal([]byte(out), &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		pod := e.InvolvedObject.Name
		if !strings.HasPrefix(pod, "event-apiserver-") || strings.HasPrefix(pod, "event-apiserver-postgres-") {
			continue
		}
		first, _ := time.Parse(time.RFC3339, e.FirstTimestamp)
		if restart.oldPods[pod] && !first.Before(restart.at) && strings.HasPrefix(e.Message, "Readiness probe failed:") {
			t.Logf("pod %s, replaced by the rollout restart: Unhealthy x%d while terminating (%s to %s): %s", pod, e.Count, e.FirstTimestamp, e.LastTimestamp, e.Message)
			continue
		}
		t.Errorf("pod %s: Unhealthy x%d (%s to %s): %s", pod, e.Count, e.FirstTimestamp, e.LastTimestamp, e.Message)
	}
	var pods struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				Conditions []struct {
					Type               string `json:"type"`
					LastTransitionTime string `json:"lastTransitionTime"`
				} `json:"conditions"`
				ContainerStatuses []struct {
					State struct {
						Running *struct {
							StartedAt string `json:"startedAt"`
						} `json:"running"`
					} `json:"state"`
				} `json:"containerStatuses"`
			} `json:"status"`
		} `json:"items"`
	}
	out = mustKubectl(t, ctx, c, "-n", "event-apiserver", "get", "pods", "-l", "app=event-apiserver", "-o", "json")
	if err := json.Unmarshal([]byte(out), &pods); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		var started, ready time.Time
		if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Running != nil {
			started, _ = time.Parse(time.RFC3339, cs[0].State.Running.StartedAt)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == "Ready" {
				ready, _ = time.Parse(time.RFC3339, cond.LastTransitionTime)
			}
		}
		t.Logf("pod %s: container started %s, Ready %s later", p.Metadata.Name, started.Format(time.TimeOnly), ready.Sub(started))
	}
}

// checkStartedDuringOutage finds the replica that started while the events
// etcd was down (not one of before) and checks that it became Ready once
// the etcd was back, with no container restart.
func checkStartedDuringOutage(t *testing.T, ctx context.Context, c *cluster.Cluster, before []string, back time.Time) {
	t.Helper()
	mustKubectl(t, ctx, c, "-n", "event-apiserver", "rollout", "status", "deployment/event-apiserver", "--timeout=5m")
	old := map[string]bool{}
	for _, p := range before {
		old[p] = true
	}
	out := mustKubectl(t, ctx, c, "-n", "event-apiserver", "get", "pods", "-l", "app=event-apiserver", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready}{"\n"}{end}`)
	found := false
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || old[f[0]] {
			continue
		}
		found = true
		if f[1] != "0" || f[2] != "true" {
			t.Errorf("pod %s, started while the events etcd was down: restarts %s, ready %s; want 0 and true", f[0], f[1], f[2])
		} else {
			t.Logf("pod %s, started while the events etcd was down: ready with no restart, %s after the etcd's manifest was put back", f[0], time.Since(back).Round(time.Second))
		}
	}
	if !found {
		t.Errorf("no replica started during the outage among:\n%s", out)
	}
}
