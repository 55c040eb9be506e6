package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// The render tests below run over everything deploy/ ships, found on disk
// (every overlay, component and static pod) and in the chart's schema
// (every mode and history store), so a new overlay, component or mode is
// checked without being listed here.

// shippedDirs lists the directories under deploy/<parent> that hold a
// kustomization.yaml.
func shippedDirs(t *testing.T, parent string) []string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "deploy", parent))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, "deploy", parent, e.Name(), "kustomization.yaml")); err == nil {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no kustomization under deploy/%s", parent)
	}
	return dirs
}

// shippedStaticPods are the manifests of deploy/static-pods, by file, with
// their placeholders as shipped (docs/aggregated.md fills them in with sed).
func shippedStaticPods(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy/static-pods/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifest in deploy/static-pods: %v", err)
	}
	pods := map[string][]*unstructured.Unstructured{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pods["static-pods/"+filepath.Base(f)] = framework.SplitManifests(t, data)
	}
	return pods
}

// chartEnum is the enum values.schema.json gives the value at path (e.g.
// "mode", "history", "store"), as helm --set spells it.
func chartEnum(t *testing.T, path ...string) []string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, helmChart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	node := schema
	for _, p := range path {
		next, ok := node["properties"].(map[string]any)[p].(map[string]any)
		if !ok {
			t.Fatalf("values.schema.json has no %s", strings.Join(path, "."))
		}
		node = next
	}
	enum, ok := node["enum"].([]any)
	if !ok || len(enum) == 0 {
		t.Fatalf("values.schema.json gives %s no enum", strings.Join(path, "."))
	}
	values := make([]string, 0, len(enum))
	for _, v := range enum {
		values = append(values, fmt.Sprint(v))
	}
	return values
}

// chartModeCases are every mode of the chart with its defaults, then with
// each history store: what an operator gets from `--set mode=...` alone,
// and from choosing a store. helmCases adds the other options.
func chartModeCases(t *testing.T) (defaults, stores []helmCase) {
	t.Helper()
	for _, mode := range chartEnum(t, "mode") {
		defaults = append(defaults, helmCase{name: mode, set: []string{"mode=" + mode}})
		for _, store := range chartEnum(t, "history", "store") {
			if store == "" {
				continue
			}
			stores = append(stores, helmCase{name: mode + "-" + store, set: []string{"mode=" + mode, "history.store=" + store}})
		}
	}
	return defaults, stores
}

// containers are the containers and init containers anywhere in obj (a
// Pod's spec, a pod template of any workload), found by shape so that no
// kind is missed.
func containers(obj any) []map[string]any {
	var found []map[string]any
	switch v := obj.(type) {
	case map[string]any:
		for key, value := range v {
			if list, ok := value.([]any); ok && (key == "containers" || key == "initContainers") {
				for _, c := range list {
					if c, ok := c.(map[string]any); ok && c["image"] != nil {
						found = append(found, c)
					}
				}
				continue
			}
			found = append(found, containers(value)...)
		}
	case []any:
		for _, value := range v {
			found = append(found, containers(value)...)
		}
	}
	return found
}

// etcdArgs are the command lines (command and args) of the containers in
// objs that run etcd, told by the command or by the image's name.
func etcdArgs(objs []*unstructured.Unstructured) map[string][]string {
	runs := map[string][]string{}
	for _, o := range objs {
		for _, c := range containers(o.Object) {
			var line []string
			for _, key := range []string{"command", "args"} {
				list, _ := c[key].([]any)
				for _, a := range list {
					line = append(line, fmt.Sprint(a))
				}
			}
			image := fmt.Sprint(c["image"])
			name, _, _ := strings.Cut(path.Base(image), ":")
			if name == "etcd" || (len(line) > 0 && path.Base(line[0]) == "etcd") {
				runs[fmt.Sprintf("%s %s container %v", o.GetKind(), o.GetName(), c["name"])] = line
			}
		}
	}
	return runs
}

// checkLeaseCheckpoints fails for every etcd in objs that runs without lease
// checkpoints and returns how many it checked. In etcd v3.6 they are the
// feature gates LeaseCheckpoint and LeaseCheckpointPersist (the
// --experimental-enable-lease-checkpoint* flags are their deprecated
// names); without them a new leader, or a one-member etcd after a restart,
// renews every lease to its full TTL.
func checkLeaseCheckpoints(t *testing.T, source string, objs []*unstructured.Unstructured) int {
	t.Helper()
	runs := etcdArgs(objs)
	for who, line := range runs {
		gates := map[string]string{}
		for i, arg := range line {
			value, ok := strings.CutPrefix(arg, "--feature-gates=")
			if !ok && arg == "--feature-gates" && i+1 < len(line) {
				value, ok = line[i+1], true
			}
			if !ok {
				continue
			}
			for _, gate := range strings.Split(value, ",") {
				name, on, _ := strings.Cut(strings.TrimSpace(gate), "=")
				gates[name] = on
			}
		}
		for _, gate := range []string{"LeaseCheckpoint", "LeaseCheckpointPersist"} {
			if gates[gate] != "true" {
				t.Errorf("%s: %s runs etcd without --feature-gates=%s=true: a leader change or restart renews every lease, so Events outlive their TTL\n%s",
					source, who, gate, strings.Join(line, " "))
			}
		}
	}
	return len(runs)
}

// TestDeployEtcdLeaseCheckpoints: every etcd this project installs runs with
// lease checkpoints: the overlays alone and with each component that
// renders over them, the static pods, and the chart in every mode and
// combination of helmCases.
func TestDeployEtcdLeaseCheckpoints(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	t.Run("overlays and components", func(t *testing.T) {
		components := shippedDirs(t, "components")
		rendered := map[string]bool{}
		etcds := 0
		for _, overlay := range shippedDirs(t, "overlays") {
			dir := "overlays/" + overlay
			etcds += checkLeaseCheckpoints(t, dir, framework.SplitManifests(t, framework.RenderOverlay(t, dir)))
			for _, component := range components {
				out, err := tryRenderWithComponents(t, dir, component)
				if err != nil {
					// A component meant for another overlay: its test ops
					// refuse this one.
					continue
				}
				rendered[component] = true
				etcds += checkLeaseCheckpoints(t, dir+"+"+component, framework.SplitManifests(t, out))
			}
		}
		for _, component := range components {
			if !rendered[component] {
				t.Errorf("components/%s renders over no overlay, so nothing checks the etcd it may change", component)
			}
		}
		if etcds == 0 {
			t.Errorf("no etcd found in any overlay: the check above looks for none")
		}
	})
	t.Run("static pods", func(t *testing.T) {
		etcds := 0
		for file, objs := range shippedStaticPods(t) {
			etcds += checkLeaseCheckpoints(t, file, objs)
		}
		if etcds == 0 {
			t.Errorf("no etcd found in deploy/static-pods: the check above looks for none")
		}
	})
	t.Run("chart", func(t *testing.T) {
		defaults, _ := chartModeCases(t)
		etcds := 0
		for _, c := range append(defaults, helmCases...) {
			etcds += checkLeaseCheckpoints(t, "the chart, "+c.name, framework.SplitManifests(t, renderChart(t, deployNamespace, c.set...)))
		}
		for _, replicas := range chartEnum(t, "eventsEtcd", "replicas") {
			set := []string{"mode=aggregated", "eventsEtcd.enabled=true", "eventsEtcd.replicas=" + replicas}
			if checkLeaseCheckpoints(t, "the chart with "+strings.Join(set, ","), framework.SplitManifests(t, renderChart(t, deployNamespace, set...))) == 0 {
				t.Errorf("the chart with %v runs no etcd: the check above looks for none", set)
			}
		}
		if etcds == 0 {
			t.Errorf("no etcd found in the chart: the check above looks for none")
		}
	})
}

// historyAnswer says how an install keeps one answer to a history query
// across its replicas and its rollouts, or returns why it does not. The
// three ways (docs/aggregated.md, "History"):
//   - one history store shared by every replica: PostgreSQL, its DSN from a
//     Secret that every replica mounts (one pod template);
//   - one replica, replaced only after it stopped (Recreate), with its
//     SQLite file on a PersistentVolumeClaim the install renders;
//   - no history (--history=false), and the API says so: the server still
//     answers eventrecords, with a Status saying how to turn history on,
//     which behind kube-apiserver needs the history APIService to reach it.
//
// An install with no event-apiserver Deployment (the events etcd alone)
// keeps no history: "".
func historyAnswer(objs []*unstructured.Unstructured) (string, error) {
	var deploy *appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "event-apiserver" {
			deploy = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, deploy, true); err != nil {
				return "", fmt.Errorf("Deployment %s: %w", o.GetName(), err)
			}
		}
	}
	if deploy == nil {
		return "", nil
	}
	pod := deploy.Spec.Template.Spec
	c := pod.Containers[0]
	flags := map[string]string{}
	for _, arg := range c.Args {
		name, value, found := strings.Cut(arg, "=")
		if !found {
			value = "true" // a bare flag: the server's booleans
		}
		flags[name] = value // the last wins, as for the server
	}
	_, historyOnly := flags["--history-only"]
	_, aggregated := flags["--aggregated"]
	if flags["--history"] == "false" {
		if historyOnly {
			return "", fmt.Errorf("--history=false with --history-only: the server refuses it")
		}
		if !aggregated {
			return "history off; the server answers eventrecords itself, saying so", nil
		}
		for _, o := range objs {
			if o.GetKind() != "APIService" || o.GetName() != "v1alpha1.history.eventapiserver.io" {
				continue
			}
			name, _, _ := unstructured.NestedString(o.Object, "spec", "service", "name")
			namespace, _, _ := unstructured.NestedString(o.Object, "spec", "service", "namespace")
			if name != "event-apiserver" || namespace != deploy.Namespace {
				return "", fmt.Errorf("history off, and its APIService sends eventrecords to %s/%s, not to event-apiserver, which would say so", namespace, name)
			}
			if names, ok := flags["--apiservice-names"]; ok && !slices.Contains(strings.Split(names, ","), o.GetName()) {
				return "", fmt.Errorf("history off, and --apiservice-names=%s keeps no caBundle on %s: kube-apiserver cannot reach the server that would say so", names, o.GetName())
			}
			return "history off; eventrecords reach the server through its APIService, which says how to turn it on", nil
		}
		return "", fmt.Errorf("history off, and no APIService v1alpha1.history.eventapiserver.io: kubectl get eventrecords answers \"the server doesn't have a resource type\", which does not say how to turn history on")
	}
	// mountOf is the volume holding file: the one of the deepest mount
	// above it.
	mountOf := func(file string) (corev1.Volume, bool) {
		var best *corev1.VolumeMount
		for i, m := range c.VolumeMounts {
			if (file == m.MountPath || strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")) &&
				(best == nil || len(m.MountPath) > len(best.MountPath)) {
				best = &c.VolumeMounts[i]
			}
		}
		if best != nil {
			for _, v := range pod.Volumes {
				if v.Name == best.Name {
					return v, true
				}
			}
		}
		return corev1.Volume{}, false
	}
	store := flags["--history-store"]
	if store == "" {
		store = "sqlite"
	}
	switch store {
	case "postgres":
		if _, ok := flags["--history-dsn"]; ok {
			return "one PostgreSQL database, the same --history-dsn on every replica", nil
		}
		file := flags["--history-dsn-file"]
		if v, ok := mountOf(file); !ok || v.Secret == nil {
			return "", fmt.Errorf("PostgreSQL history whose --history-dsn-file=%q is not a mounted Secret's key", file)
		}
		return "one PostgreSQL database, its DSN from one Secret on every replica", nil
	case "sqlite":
		replicas := int32(1)
		if deploy.Spec.Replicas != nil {
			replicas = *deploy.Spec.Replicas
		}
		if replicas != 1 {
			return "", fmt.Errorf("%d replicas, each with its own SQLite history: one query answers differently by replica", replicas)
		}
		if deploy.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			return "", fmt.Errorf("SQLite history with a %q rollout: old and new pod run at once, each answering from its own history", deploy.Spec.Strategy.Type)
		}
		file := flags["--history-dsn"]
		if file == "" {
			file = filepath.Join(flags["--data-dir"], "history", "history.db")
		}
		v, ok := mountOf(file)
		if !ok || v.PersistentVolumeClaim == nil {
			return "", fmt.Errorf("SQLite history at %s is on no PersistentVolumeClaim (%+v): a rollout loses it", file, v.VolumeSource)
		}
		for _, o := range objs {
			if o.GetKind() == "PersistentVolumeClaim" && o.GetName() == v.PersistentVolumeClaim.ClaimName {
				return "one replica, SQLite on the claim " + o.GetName(), nil
			}
		}
		return "", fmt.Errorf("SQLite history on the claim %s, which the install does not make", v.PersistentVolumeClaim.ClaimName)
	}
	return "", fmt.Errorf("unknown --history-store=%s", store)
}

// TestDeployHistoryOneAnswer (issue 48, "safe as shipped"): every overlay,
// and the chart in every mode with its defaults, gives one answer to a
// history query whichever replica answers it, and keeps it across rollouts:
// it shares one history store across its replicas, runs one replica on a
// durable volume, or serves no history and says so (historyAnswer). The
// chart's every history store and every combination of helmCases are held
// to it too; a combination the chart refuses installs nothing and passes.
func TestDeployHistoryOneAnswer(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	check := func(t *testing.T, source string, objs []*unstructured.Unstructured) {
		t.Helper()
		how, err := historyAnswer(objs)
		if err != nil {
			t.Errorf("%s: %v", source, err)
			return
		}
		if how != "" {
			t.Logf("%s: %s", source, how)
		}
	}
	t.Run("overlays", func(t *testing.T) {
		served := 0
		for _, overlay := range shippedDirs(t, "overlays") {
			objs := framework.SplitManifests(t, framework.RenderOverlay(t, "overlays/"+overlay))
			check(t, "overlays/"+overlay, objs)
			for _, o := range objs {
				if o.GetKind() == "Deployment" && o.GetName() == "event-apiserver" {
					served++
				}
			}
		}
		if served == 0 {
			t.Errorf("no overlay runs event-apiserver: the check above checks nothing")
		}
	})
	t.Run("chart", func(t *testing.T) {
		defaults, stores := chartModeCases(t)
		for _, c := range append(defaults, helmCases...) {
			check(t, "the chart, "+c.name, framework.SplitManifests(t, renderChart(t, deployNamespace, c.set...)))
		}
		for _, c := range stores {
			args := append([]string{"template", "event-apiserver", helmChart, "--namespace", deployNamespace}, helmSetArgs(c.set)...)
			stdout, stderr, err := runHelm(t, args...)
			if err != nil {
				t.Logf("the chart refuses %v: %s", c.set, strings.TrimSpace(stderr))
				continue
			}
			check(t, "the chart, "+c.name, framework.SplitManifests(t, []byte(stdout)))
		}
	})
}
