package deploy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// helmChart is the chart, relative to the repository root, as the install
// command of the docs names it.
const helmChart = "deploy/helm/event-apiserver"

// helmBinary is _output/bin/helm, which hack/build-helm.sh builds (hack/test.sh
// runs it). Missing, the test is skipped, except under CI=true, where it
// fails: there the suite's scripts must have built it.
func helmBinary(t *testing.T) string {
	t.Helper()
	path, err := testbed.OutputBinary("helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("%s is missing: run hack/build-helm.sh (hack/test.sh builds it before the tests)", path)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// runHelm runs helm from the repository root with its configuration, cache
// and data under the test's temporary directory, so that nothing of the
// machine's own helm setup (repositories, plugins) takes part.
func runHelm(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	bin := helmBinary(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return stdout.String(), stderr.String(), err
}

// helmSetArgs turns "key=value" pairs into helm's --set flags.
func helmSetArgs(set []string) []string {
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// renderChart renders the chart as the docs' install command installs it
// (release event-apiserver in namespace), for kube-apiserver v1.36.3,
// with the given --set values.
func renderChart(t *testing.T, namespace string, set ...string) []byte {
	t.Helper()
	args := append([]string{"template", "event-apiserver", helmChart, "--namespace", namespace,
		"--kube-version", testbed.KubeVersion}, helmSetArgs(set)...)
	stdout, stderr, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return []byte(stdout)
}

// helmCase is one combination of values, with what the overlays render for
// it (empty overlay: no overlay has it).
type helmCase struct {
	name string
	set  []string
	// overlays are rendered and concatenated, each with the components
	// listed after a "+" (as an operator's own kustomization adds them).
	overlays []string
	// kinds the chart must render besides the ones every mode has.
	kinds []string
}

// helmCases are the combinations that change what is rendered: every mode,
// each history store, the events etcd with one and three members, and each
// optional part.
var helmCases = []helmCase{
	{name: "history-only", overlays: []string{"overlays/history-only"}, kinds: []string{"APIService", "PersistentVolumeClaim"}},
	{name: "history-only-postgres", set: []string{"history.store=postgres"},
		overlays: []string{"overlays/history-only-postgres"}, kinds: []string{"APIService", "PodDisruptionBudget"}},
	{name: "aggregated", set: []string{"mode=aggregated"}, overlays: []string{"overlays/aggregated"}, kinds: []string{"APIService", "PodDisruptionBudget"}},
	{name: "aggregated-postgres", set: []string{"mode=aggregated", "history.store=postgres"},
		overlays: []string{"overlays/aggregated+history-postgres"}},
	{name: "aggregated-events-etcd", set: []string{"mode=aggregated", "eventsEtcd.enabled=true"},
		overlays: []string{"overlays/aggregated", "overlays/events-etcd"}, kinds: []string{"StatefulSet", "Job"}},
	{name: "aggregated-events-etcd-one-member", set: []string{"mode=aggregated", "eventsEtcd.enabled=true", "eventsEtcd.replicas=1"},
		overlays: []string{"overlays/aggregated", "overlays/events-etcd+events-etcd-one-member"}, kinds: []string{"StatefulSet", "Job"}},
	{name: "aggregated-static-pod-etcd", set: []string{"mode=aggregated", "etcd.staticPods=true"},
		overlays: []string{"overlays/aggregated+static-pod-etcd"}},
	// docs/aggregated.md's install, but for components/postgres.
	{name: "aggregated-static-pod-etcd-postgres", set: []string{"mode=aggregated", "etcd.staticPods=true", "history.store=postgres"},
		overlays: []string{"overlays/aggregated+static-pod-etcd+history-postgres"}},
	{name: "standalone", set: []string{"mode=standalone"}, overlays: []string{"overlays/standalone"}, kinds: []string{"PersistentVolumeClaim"}},
	{name: "aggregated-monitoring", set: []string{"mode=aggregated", "monitoring.enabled=true"},
		overlays: []string{"overlays/aggregated+monitoring"}, kinds: []string{"ServiceMonitor", "PrometheusRule"}},
	{name: "history-only-monitoring", set: []string{"monitoring.enabled=true"},
		overlays: []string{"overlays/history-only+monitoring"}, kinds: []string{"ServiceMonitor", "PrometheusRule"}},
	{name: "aggregated-networkpolicy", set: []string{"mode=aggregated", "networkPolicy.enabled=true", "networkPolicy.kubeAPIServerCIDRs={192.0.2.0/24}"},
		overlays: []string{"overlays/aggregated+networkpolicy"}, kinds: []string{"NetworkPolicy"}},
	// docs/fleet.md's install.
	{name: "fleet-hub", set: []string{"history.store=postgres", "fleet.enabled=true"},
		overlays: []string{"overlays/fleet-hub"}, kinds: []string{"APIService", "Role", "RoleBinding"}},
	{name: "history-only-cert-manager", set: []string{"certManager.enabled=true"}, kinds: []string{"Issuer", "Certificate"}},
	{name: "aggregated-cert-manager-issuer", set: []string{"mode=aggregated", "certManager.enabled=true",
		"certManager.issuerRef.name=cluster-ca", "certManager.issuerRef.kind=ClusterIssuer"}, kinds: []string{"Certificate"}},
	{name: "aggregated-everything", set: []string{"mode=aggregated", "replicaCount=3", "history.store=postgres",
		"eventsEtcd.enabled=true", "monitoring.enabled=true", "certManager.enabled=true",
		"networkPolicy.enabled=true", "networkPolicy.kubeAPIServerCIDRs={10.0.0.0/24,10.0.1.0/24}",
		"eventTTL=2h", "eventTTLRules={type=Warning:24h,reason=Pulled\\,reportingController=kubelet:10m}",
		"history.retention=720h", "history.maxBytes=10737418240", "goMemLimit=900MiB",
		"resources.requests.memory=1000Mi", "resources.limits.memory=1100Mi",
		"nodeSelector.kubernetes\\.io/os=linux", "extraArgs={--v=2}"},
		kinds: []string{"StatefulSet", "ServiceMonitor", "Certificate", "NetworkPolicy", "PodDisruptionBudget"}},
}

// TestHelmLint: `helm lint --strict` passes for every combination of values
// the other tests render, and bad values fail lint and install alike with a
// message that names the value and what is allowed.
func TestHelmLint(t *testing.T) {
	t.Parallel()
	for _, c := range helmCases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", helmChart, "--namespace", "event-apiserver"}, helmSetArgs(c.set)...)
			stdout, stderr, err := runHelm(t, args...)
			if err != nil {
				t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
			}
		})
	}
	for _, bad := range []struct {
		name string
		set  []string
		// want is in the schema's message, which helm lint, template and
		// install print.
		want []string
		// explain is in the chart's own message (templates/_helpers.tpl),
		// printed when the schema is skipped; empty: the schema alone
		// refuses it.
		explain string
	}{
		{"unknown mode", []string{"mode=history"}, []string{"/mode", "history-only", "aggregated", "standalone"}, ""},
		{"misspelt value", []string{"replicas=2"}, []string{"replicas"}, ""},
		{"two events etcd members", []string{"mode=aggregated", "eventsEtcd.enabled=true", "eventsEtcd.replicas=2"}, []string{"/eventsEtcd/replicas", "1, 3"}, ""},
		{"unknown history store", []string{"history.store=mysql"}, []string{"/history/store", "sqlite", "postgres"}, ""},
		{"TTL not a duration", []string{"mode=aggregated", "eventTTL=forever"}, []string{"/eventTTL"}, ""},
		{"malformed TTL rule", []string{"mode=aggregated", "eventTTLRules={Warning}"}, []string{"/eventTTLRules/0"}, ""},
		{"no PostgreSQL Secret", []string{"history.store=postgres", "history.postgres.existingSecret="}, []string{"/history/postgres/existingSecret"}, ""},
		{"SQLite in aggregated mode", []string{"mode=aggregated", "history.store=sqlite"}, []string{"/history/store", "postgres", "none"},
			"each replica would keep its own SQLite on its emptyDir"},
		{"history-only without history", []string{"history.store=none"}, []string{"/history/store", "sqlite", "postgres"},
			"history.store=none with mode=history-only"},
		{"retention with history off", []string{"mode=aggregated", "history.retention=720h"}, []string{"/history/retention"},
			"history.retention and history.maxBytes need history, which is off (history.store=none, mode=aggregated's default)"},
		{"SQLite with two replicas", []string{"replicaCount=2"}, []string{"/replicaCount", "want 1"},
			"history.store=sqlite keeps history in one file on one volume, for one replica; use history.store=postgres"},
		{"standalone with two replicas", []string{"mode=standalone", "replicaCount=2"}, []string{"/replicaCount", "want 1"},
			"standalone runs one replica"},
		{"events etcd outside aggregated", []string{"eventsEtcd.enabled=true"}, []string{"/eventsEtcd/enabled", "must be false"},
			"eventsEtcd.enabled=true needs mode=aggregated"},
		{"two events etcds", []string{"mode=aggregated", "eventsEtcd.enabled=true", "etcd.staticPods=true"}, []string{"/etcd/staticPods", "must be false"},
			"two events etcds"},
		{"cert-manager in standalone", []string{"mode=standalone", "certManager.enabled=true"}, []string{"/certManager/enabled", "must be false"},
			"certManager.enabled=true needs mode=history-only or aggregated"},
		{"monitoring in standalone", []string{"mode=standalone", "monitoring.enabled=true"}, []string{"/monitoring/enabled", "must be false"},
			"monitoring.enabled=true needs mode=history-only or aggregated"},
		{"a fleet on SQLite", []string{"fleet.enabled=true"}, []string{"/history/store", "postgres"},
			"fleet.enabled=true needs history.store=postgres"},
		{"a fleet outside history-only", []string{"mode=aggregated", "history.store=postgres", "fleet.enabled=true"}, []string{"/mode", "history-only"},
			"fleet.enabled=true needs mode=history-only"},
		{"a fleet namespace no cluster can have", []string{"history.store=postgres", "fleet.enabled=true", "fleet.namespace=Fleet_1"}, []string{"/fleet/namespace"}, ""},
		{"network policy admitting nobody", []string{"networkPolicy.enabled=true"}, []string{"/networkPolicy/kubeAPIServerCIDRs", "minItems"},
			"networkPolicy.enabled=true needs networkPolicy.kubeAPIServerCIDRs"},
	} {
		t.Run("refuses "+bad.name, func(t *testing.T) {
			refused := func(want []string, verb ...string) {
				t.Helper()
				args := append(append(verb, "--namespace", "event-apiserver"), helmSetArgs(bad.set)...)
				stdout, stderr, err := runHelm(t, args...)
				if err == nil {
					t.Errorf("helm %s passed", strings.Join(args, " "))
					return
				}
				for _, w := range want {
					if !strings.Contains(stdout+stderr, w) {
						t.Errorf("helm %s: the message does not say %q:\n%s%s", strings.Join(args, " "), w, stdout, stderr)
					}
				}
			}
			refused(bad.want, "lint", "--strict", helmChart)
			refused(bad.want, "template", "event-apiserver", helmChart)
			if bad.explain != "" {
				refused([]string{bad.explain}, "template", "event-apiserver", helmChart, "--skip-schema-validation")
			}
		})
	}
}

// installCRDFixtures creates the test-only CRDs of testdata/crds (the
// Prometheus operator's and cert-manager's kinds the chart renders) and
// waits until they are served.
func installCRDFixtures(t *testing.T, kube *framework.KubeAPIServer) {
	t.Helper()
	kubectl := framework.KubectlBinary(t)
	for _, f := range []string{"testdata/crds/monitoring.coreos.com.yaml", "testdata/crds/cert-manager.io.yaml"} {
		if out, errOut, err := framework.KubectlAt(t, kubectl, kube.KubeconfigPath, nil, "apply", "-f", f); err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s%s", f, err, out, errOut)
		}
	}
	for _, crd := range []string{"servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com",
		"issuers.cert-manager.io", "certificates.cert-manager.io"} {
		if out, errOut, err := framework.KubectlAt(t, kubectl, kube.KubeconfigPath, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crd); err != nil {
			t.Fatalf("kubectl wait crd/%s: %v\n%s%s", crd, err, out, errOut)
		}
	}
}

// TestHelmTemplateDryRun renders the chart for every combination of
// helmCases and applies each with `kubectl apply --dry-run=server` (strict
// field validation) to a kube-apiserver v1.36.3, which checks every object
// against its schema, admission included; the Prometheus operator's and
// cert-manager's kinds against the test-only CRDs of testdata/crds.
// kube-apiserver runs with --runtime-config=events.k8s.io/v1=false, as
// aggregated mode needs; history-only needs nothing of it. It also checks
// what each option changes in the rendered objects.
func TestHelmTemplateDryRun(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		ExtraFlags: []string{"--runtime-config=events.k8s.io/v1=false"},
	})
	installCRDFixtures(t, kube)
	// helm install --create-namespace makes it; a server-side dry run of
	// namespaced objects needs it to exist.
	// The fleet's namespace too, which its docs create before the install.
	for _, ns := range []string{deployNamespace, fleetNamespace} {
		if _, err := kube.Client(t).CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	always := []string{"ServiceAccount", "Deployment", "Service"}
	for _, c := range helmCases {
		t.Run(c.name, func(t *testing.T) {
			rendered := renderChart(t, deployNamespace, c.set...)
			objs := framework.SplitManifests(t, rendered)
			kinds := map[string]bool{}
			for _, o := range objs {
				kinds[o.GetKind()] = true
				if o.GetKind() == "Namespace" {
					t.Errorf("the chart renders the Namespace %s: helm install --create-namespace makes it", o.GetName())
				}
			}
			for _, k := range append(append([]string(nil), always...), c.kinds...) {
				if !kinds[k] {
					t.Errorf("no %s rendered", k)
				}
			}
			checkHelmOptions(t, c, objs)
			path := framework.WriteFile(t, c.name+".yaml", string(rendered))
			stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil,
				"apply", "--dry-run=server", "--validate=strict", "-f", path)
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server: %v\n%s%s", err, stdout, stderr)
			}
		})
	}
	// The docs' install command itself, as helm runs it against the
	// cluster (lookups, schema, hooks), short of creating anything.
	t.Run("helm install as the docs say", func(t *testing.T) {
		args := []string{"install", "event-apiserver", helmChart, "--namespace", deployNamespace, "--create-namespace",
			"--kubeconfig", kube.KubeconfigPath, "--dry-run=server"}
		stdout, stderr, err := runHelm(t, args...)
		if err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
		if !strings.Contains(stdout, "kind: APIService") || !strings.Contains(stdout, "v1alpha1.history.eventapiserver.io") {
			t.Errorf("helm install renders no history APIService:\n%s", stdout)
		}
	})
	// The overlays' monitoring component, which TestDeployOverlaysDryRun
	// cannot dry-run without these CRDs.
	t.Run("overlay components/monitoring", func(t *testing.T) {
		path := framework.WriteFile(t, "monitoring.yaml", string(renderWithComponents(t, "overlays/aggregated", "monitoring")))
		if out, errOut, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil, "apply", "--dry-run=server", "--validate=strict", "-f", path); err != nil {
			t.Fatalf("kubectl apply --dry-run=server: %v\n%s%s", err, out, errOut)
		}
	})
}

// checkHelmOptions checks the effect of the values the overlays have no
// counterpart for (cert-manager, TTL rules, retention, GOMEMLIMIT, extra
// flags); TestHelmMatchesOverlays covers the rest.
func checkHelmOptions(t *testing.T, c helmCase, objs []*unstructured.Unstructured) {
	t.Helper()
	set := strings.Join(c.set, " ")
	deploy := framework.FindObject(t, objs, "Deployment", "event-apiserver")
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	container := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(container, "args")
	joined := strings.Join(args, " ")
	if strings.Contains(set, "certManager.enabled=true") {
		for _, want := range []string{"--tls-cert-file=/var/run/event-apiserver-tls/tls.crt", "--tls-private-key-file=/var/run/event-apiserver-tls/tls.key"} {
			if !strings.Contains(joined, want) {
				t.Errorf("with cert-manager the server runs without %s: %s", want, joined)
			}
		}
		if strings.Contains(joined, "--serving-cert-secret") || strings.Contains(joined, "--apiservice-names") {
			t.Errorf("with cert-manager the server still makes its own certificate: %s", joined)
		}
		cert := framework.FindObject(t, objs, "Certificate", "event-apiserver")
		if name, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); name != "event-apiserver-tls" {
			t.Errorf("the Certificate's Secret is %q, the pod mounts event-apiserver-tls", name)
		}
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if !cmp.Equal(dnsNames, []string{"event-apiserver.event-apiserver.svc", "event-apiserver.event-apiserver.svc.cluster.local"}) {
			t.Errorf("the Certificate is for %v, not the Service the APIServices name", dnsNames)
		}
		for _, o := range objs {
			if o.GetKind() != "APIService" {
				continue
			}
			if got := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "event-apiserver/event-apiserver" {
				t.Errorf("APIService %s: cert-manager.io/inject-ca-from is %q, want event-apiserver/event-apiserver", o.GetName(), got)
			}
		}
		for _, o := range objs {
			if o.GetName() == "event-apiserver:serving-cert" {
				t.Errorf("with cert-manager the chart still grants the server its own certificate's Secret (%s)", o.GetKind())
			}
		}
	}
	if c.name == "aggregated-everything" {
		for _, want := range []string{"--event-ttl=2h", "--event-ttl-rule=type=Warning:24h", "--event-ttl-rule=reason=Pulled,reportingController=kubelet:10m",
			"--history-retention=720h", "--history-max-bytes=10737418240", "--history-store=postgres", "--v=2"} {
			if !strings.Contains(joined, want) {
				t.Errorf("the server runs without %s: %s", want, joined)
			}
		}
		env, _, _ := unstructured.NestedSlice(container, "env")
		found := false
		for _, e := range env {
			e := e.(map[string]any)
			if e["name"] == "GOMEMLIMIT" {
				found = e["value"] == "900MiB"
			}
			if e["name"] == "GOMEMLIMIT_MIB" {
				t.Errorf("goMemLimit is set, yet GOMEMLIMIT still follows the memory request")
			}
		}
		if !found {
			t.Errorf("GOMEMLIMIT is not goMemLimit's 900MiB: %v", env)
		}
		if replicas, _, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas"); replicas != 3 {
			t.Errorf("replicas %d, want replicaCount's 3", replicas)
		}
	}
}

// renderOverlays renders what helmCase.overlays names, one document stream.
func renderOverlays(t *testing.T, overlays []string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, o := range overlays {
		dir, components, _ := strings.Cut(o, "+")
		var rendered []byte
		if components == "" {
			rendered = framework.RenderOverlay(t, dir)
		} else {
			rendered = renderWithComponents(t, dir, strings.Split(components, "+")...)
		}
		objs = append(objs, framework.SplitManifests(t, rendered)...)
	}
	return objs
}

// objectKey names an object the way the API does.
func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// TestHelmMatchesOverlays renders the chart and the overlays for each mode
// and option they share, and requires the same objects (kind, namespace and
// name; the overlays' Namespace aside, which helm install --create-namespace
// makes) with the same content: everything but labels and annotations is
// compared (container args, env, probes, ports, securityContext, resources,
// volumes, RBAC rules and subjects, APIService specs, the events etcd), and
// the overlays' labels must all be on the chart's objects (the chart adds
// helm's own). So the two cannot drift apart silently: a change to one
// fails here until the other follows.
func TestHelmMatchesOverlays(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	for _, c := range helmCases {
		if len(c.overlays) == 0 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			chart := map[string]*unstructured.Unstructured{}
			for _, o := range framework.SplitManifests(t, renderChart(t, deployNamespace, c.set...)) {
				chart[objectKey(o)] = o
			}
			overlay := map[string]*unstructured.Unstructured{}
			for _, o := range renderOverlays(t, c.overlays) {
				if o.GetKind() == "Namespace" {
					continue
				}
				overlay[objectKey(o)] = o
			}
			var onlyChart, onlyOverlay []string
			for k := range chart {
				if overlay[k] == nil {
					onlyChart = append(onlyChart, k)
				}
			}
			for k := range overlay {
				if chart[k] == nil {
					onlyOverlay = append(onlyOverlay, k)
				}
			}
			sort.Strings(onlyChart)
			sort.Strings(onlyOverlay)
			if len(onlyChart)+len(onlyOverlay) > 0 {
				t.Errorf("the chart and %v render different objects:\nonly the chart: %v\nonly the overlays: %v", c.overlays, onlyChart, onlyOverlay)
			}
			keys := make([]string, 0, len(overlay))
			for k := range overlay {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				o, h := overlay[k], chart[k]
				if h == nil {
					continue
				}
				for name, value := range o.GetLabels() {
					if got, ok := h.GetLabels()[name]; !ok || got != value {
						t.Errorf("%s: the overlay labels it %s=%s, the chart %q", k, name, value, got)
					}
				}
				if diff := cmp.Diff(withoutLabels(o), withoutLabels(h)); diff != "" {
					t.Errorf("%s differs (-overlay +chart):\n%s", k, diff)
				}
			}
		})
	}
	// The PrometheusRule's PromQL lives in the chart's files/ and in the
	// component: the overlay comparison above already holds them equal.
}

// withoutLabels is the object with its labels and annotations dropped, the
// only parts the chart may add to (helm's labels, hooks, resource policy),
// and its pod's volumes in name order: kustomize's strategic merge puts a
// patch's volumes first, the chart in the order it declares them, and
// their order means nothing (their mounts' order is compared as it is).
// Its containers' flags are the ones the server sees: a flag given twice
// takes its last value (components/history-postgres resets an overlay's
// --history-max-bytes), so only the last is kept, where it stands.
func withoutLabels(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	if containers, ok, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "containers"); ok {
		for _, container := range containers {
			container := container.(map[string]any)
			if args, ok := container["args"].([]any); ok {
				container["args"] = lastFlagsWin(args)
			}
		}
		if err := unstructured.SetNestedSlice(c.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			panic(err)
		}
	}
	if volumes, ok, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "volumes"); ok {
		sort.SliceStable(volumes, func(i, j int) bool {
			return fmt.Sprint(volumes[i].(map[string]any)["name"]) < fmt.Sprint(volumes[j].(map[string]any)["name"])
		})
		if err := unstructured.SetNestedSlice(c.Object, volumes, "spec", "template", "spec", "volumes"); err != nil {
			panic(err)
		}
	}
	return c.Object
}

// TestHistorySQLiteFitsItsVolume holds every install that keeps history in
// SQLite, from the chart or the overlays, to a --history-max-bytes that
// leaves its volume room for the WAL and a minute of capture (and, with the
// embedded etcd, for etcd): past its sizeLimit an emptyDir's pod is evicted
// and its history with it; a full claim stops capture until versions age
// out.
func TestHistorySQLiteFitsItsVolume(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	cases := append([]helmCase{
		{name: "history-only-claim-50Gi", set: []string{"history.sqlite.persistence.size=50Gi"}},
		{name: "history-only-claim-256Mi", set: []string{"history.sqlite.persistence.size=256Mi"}},
		{name: "standalone-claim-20Gi", set: []string{"mode=standalone", "standalone.persistence.size=20Gi"}},
	}, helmCases...)
	checkEachRender(t, cases, checkHistoryFitsVolume)
}

// checkEachRender runs check, in a subtest per case, on what the chart
// renders with the case's values and on what its overlays render.
func checkEachRender(t *testing.T, cases []helmCase, check func(t *testing.T, source string, objs []*unstructured.Unstructured)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, "the chart", framework.SplitManifests(t, renderChart(t, deployNamespace, c.set...)))
			if len(c.overlays) > 0 {
				check(t, fmt.Sprint(c.overlays), renderOverlays(t, c.overlays))
			}
		})
	}
}

// checkHistoryFitsVolume is TestHistorySQLiteFitsItsVolume for one render.
func checkHistoryFitsVolume(t *testing.T, source string, objs []*unstructured.Unstructured) {
	t.Helper()
	// The SQLite WAL (up to 40 MiB, walCheckpointPages) and a minute of
	// capture between retention passes at 1000 versions a second (about
	// 80 MiB at 1382 bytes a version, docs/operations.md's sizing).
	const walAndCaptureBytes = 128 << 20
	// The embedded etcd's 2 GiB quota with its WAL and snapshots.
	const embeddedEtcdBytes = 4 << 30
	deploy := &appsv1.Deployment{}
	framework.FromUnstructured(t, framework.FindObject(t, objs, "Deployment", "event-apiserver"), deploy)
	flags := map[string]string{}
	for _, arg := range deploy.Spec.Template.Spec.Containers[0].Args {
		name, value, _ := strings.Cut(arg, "=")
		flags[name] = value // the last wins, as for the server
	}
	if store := flags["--history-store"]; (store != "" && store != "sqlite") || flags["--history"] == "false" {
		return
	}
	maxBytes, err := strconv.ParseInt(flags["--history-max-bytes"], 10, 64)
	if err != nil || maxBytes <= 0 {
		t.Errorf("%s: SQLite history with no cap (--history-max-bytes=%q)", source, flags["--history-max-bytes"])
		return
	}
	var size *resource.Quantity
	for _, v := range deploy.Spec.Template.Spec.Volumes {
		switch {
		case v.Name != "data":
		case v.EmptyDir != nil:
			size = v.EmptyDir.SizeLimit
		case v.PersistentVolumeClaim != nil:
			claim := &corev1.PersistentVolumeClaim{}
			framework.FromUnstructured(t, framework.FindObject(t, objs, "PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName), claim)
			request := claim.Spec.Resources.Requests[corev1.ResourceStorage]
			size = &request
		}
	}
	if size == nil {
		t.Errorf("%s: the data volume holding SQLite history has no size", source)
		return
	}
	room := size.Value() - walAndCaptureBytes
	_, historyOnly := flags["--history-only"]
	_, externalEtcd := flags["--etcd-servers"]
	if !historyOnly && !externalEtcd {
		room -= embeddedEtcdBytes
	}
	if maxBytes > room {
		t.Errorf("%s: --history-max-bytes=%d on a %s volume leaves %d bytes for the rest, want at least %d",
			source, maxBytes, size, size.Value()-maxBytes, size.Value()-room)
	}
}

// lastFlagsWin drops each --flag=value that the same flag repeats later.
func lastFlagsWin(args []any) []any {
	flag := func(arg any) string {
		name, _, _ := strings.Cut(fmt.Sprint(arg), "=")
		return name
	}
	last := map[string]int{}
	for i, arg := range args {
		last[flag(arg)] = i
	}
	kept := make([]any, 0, len(args))
	for i, arg := range args {
		if last[flag(arg)] == i {
			kept = append(kept, arg)
		}
	}
	return kept
}

// TestHelmCertManagerKubeletless runs the chart's history-only install with
// certManager.enabled=true the kubelet-less way, doing what cert-manager
// would do and nothing more: it issues the Certificate's Secret for the
// Certificate's own dnsNames (the controller), and copies its ca.crt into
// the caBundle of each APIService whose cert-manager.io/inject-ca-from
// annotation names that Certificate (the CA injector). The APIService
// becomes Available only if the server serves the mounted certificate and
// the chart's names, annotation and Secret agree with each other and with
// what kube-apiserver's aggregator verifies.
func TestHelmCertManagerKubeletless(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const podIP = "127.0.0.62"
	hostsFile := framework.WriteHostsFile(t, map[string][]string{replicaHost(0): {podIP}})
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		HostsFile:  hostsFile,
		ExtraFlags: []string{"--enable-aggregator-routing=true"},
	})
	installCRDFixtures(t, kube)
	aggregator, err := aggregatorclient.NewForConfig(kube.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := &deployedCluster{kube: kube, client: kube.Client(t), aggregator: aggregator}
	framework.MustCreate(t, func() error {
		_, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNamespace}}, metav1.CreateOptions{})
		return err
	})
	objs := framework.SplitManifests(t, renderChart(t, deployNamespace, "certManager.enabled=true"))
	c.apply(t, objs)

	// cert-manager's controller: the Secret the Certificate asks for.
	cert := framework.FindObject(t, objs, "Certificate", "event-apiserver")
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if len(dnsNames) == 0 {
		t.Fatalf("the Certificate has no dnsNames: %v", cert.Object)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(dnsNames[0], nil, dnsNames[1:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.CoreV1().Secrets(deployNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": certPEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// cert-manager's CA injector.
	for _, o := range objs {
		if o.GetKind() != "APIService" {
			continue
		}
		from := o.GetAnnotations()["cert-manager.io/inject-ca-from"]
		if from != deployNamespace+"/"+cert.GetName() {
			t.Fatalf("APIService %s injects its CA from %q, not the Certificate %s/%s", o.GetName(), from, deployNamespace, cert.GetName())
		}
		patch := fmt.Sprintf(`{"spec":{"caBundle":%q}}`, base64.StdEncoding.EncodeToString(certPEM))
		if _, err := aggregator.ApiregistrationV1().APIServices().Patch(ctx, o.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	kubelet := framework.NewKubelet(t, kube, map[string]string{"/event-apiserver": framework.ServerBinary(t)}, hostsFile)
	deploy := &appsv1.Deployment{}
	framework.FromUnstructured(t, framework.FindObject(t, objs, "Deployment", "event-apiserver"), deploy)
	c.runHistoryReplica(t, kubelet, podIP, deploy.Spec.Template)
	served, err := servedCert(podIP)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	if !bytes.Equal(served, pem.EncodeToMemory(block)) {
		t.Errorf("the server does not serve the certificate of the Secret %s", secretName)
	}
	if stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil, "get", "eventrecords", "-A"); err != nil {
		t.Errorf("kubectl get eventrecords through the APIService: %v\n%s%s", err, stdout, stderr)
	}
	if _, err := c.client.CoreV1().Secrets(deployNamespace).Get(ctx, "event-apiserver-serving", metav1.GetOptions{}); err == nil {
		t.Errorf("with cert-manager the server still made its own certificate's Secret")
	}
}
