package deploy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

const historyAPIService = "v1alpha1.history.eventapiserver.io"

// TestHistoryOnlyKubeletless installs the history-only server on a
// kube-apiserver v1.36.3 run with its defaults, the front-proxy flags and a
// short --event-ttl: nothing of the control plane changes. It does so twice
// on the same kube-apiserver and kube-scheduler, one after the other: from
// deploy/overlays/history-only, then from the Helm chart as the docs install
// it (`helm install event-apiserver deploy/helm/event-apiserver --namespace
// event-apiserver`, rendered with helm template). Each time, Events written
// by client-go's recorders through both APIs and by the real kube-scheduler
// expire from kube-apiserver, and `kubectl get eventrecords` still finds
// each by regarding.name and since, through the aggregation layer.
//
// --enable-aggregator-routing stands in for kube-proxy, which this machine
// does not run: the aggregator dials the endpoints the test maintains
// rather than the Service's cluster IP.
func TestHistoryOnlyKubeletless(t *testing.T) {
	t.Parallel()
	const podIP = "127.0.0.61"
	hostsFile := framework.WriteHostsFile(t, map[string][]string{replicaHost(0): {podIP}})
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		HostsFile:  hostsFile,
		EventTTL:   15 * time.Second,
		ExtraFlags: []string{"--enable-aggregator-routing=true"},
	})
	aggregator, err := aggregatorclient.NewForConfig(kube.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	// A real kube-scheduler: a pod with no node to go to gets FailedScheduling.
	startKubeScheduler(t, kube)
	for _, install := range []struct {
		name   string
		render func(t *testing.T) []byte
	}{
		{"overlay", func(t *testing.T) []byte { return framework.RenderOverlay(t, "overlays/history-only") }},
		{"chart", func(t *testing.T) []byte { return renderChart(t, deployNamespace) }},
	} {
		// One after the other: both install the same APIService.
		t.Run(install.name, func(t *testing.T) {
			c := &deployedCluster{kube: kube, client: kube.Client(t), aggregator: aggregator}
			historyOnlyInstall(t, c, hostsFile, podIP, install.render(t))
		})
	}
}

// historyOnlyInstall applies the rendered manifests of one history-only
// install, runs its Deployment's pod and checks what
// TestHistoryOnlyKubeletless says. When it returns, the pod is stopped and
// the APIService and the serving certificate's Secret are gone, so that the
// next install starts from neither.
func historyOnlyInstall(t *testing.T, c *deployedCluster, hostsFile, podIP string, rendered []byte) {
	ctx := context.Background()
	// helm install --create-namespace makes it; the overlay renders it.
	framework.MustCreate(t, func() error {
		_, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNamespace}}, metav1.CreateOptions{})
		return err
	})
	// Runs after the pod has stopped (cleanups run last-in first-out).
	t.Cleanup(func() {
		if err := c.aggregator.ApiregistrationV1().APIServices().Delete(ctx, historyAPIService, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting APIService %s: %v", historyAPIService, err)
		}
		if err := c.client.CoreV1().Secrets(deployNamespace).Delete(ctx, "event-apiserver-serving", metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting the serving certificate's Secret: %v", err)
		}
	})
	kubelet := framework.NewKubelet(t, c.kube, map[string]string{"/event-apiserver": framework.ServerBinary(t)}, hostsFile)
	objs := framework.SplitManifests(t, rendered)
	c.apply(t, objs)
	deploy := &appsv1.Deployment{}
	framework.FromUnstructured(t, framework.FindObject(t, objs, "Deployment", "event-apiserver"), deploy)
	if *deploy.Spec.Replicas != 1 {
		t.Fatalf("the SQLite install runs %d replicas, want 1", *deploy.Spec.Replicas)
	}
	pod := c.runHistoryReplica(t, kubelet, podIP, deploy.Spec.Template)
	assertHardened(t, pod)

	ns := framework.UniqueName("history-only")
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	regarding := map[string]string{} // regarding.name → the reason written

	// tools/record: core/v1, as the kubelet and the controllers write.
	coreBroadcaster := record.NewBroadcaster()
	defer coreBroadcaster.Shutdown()
	coreBroadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	coreRecorder := coreBroadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "history-only-test"})
	corePod := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "core-recorded", UID: types.UID(framework.UniqueName("uid"))}
	coreRecorder.Event(corePod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	coreRecorder.Event(corePod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	regarding[corePod.Name] = "BackOff"

	// tools/events: events.k8s.io/v1, as kube-scheduler and
	// controller-runtime's new recorder write.
	eventsBroadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.client.EventsV1()})
	stopEvents := make(chan struct{})
	eventsBroadcaster.StartRecordingToSink(stopEvents)
	defer func() { close(stopEvents); eventsBroadcaster.Shutdown() }()
	eventsRecorder := eventsBroadcaster.NewRecorder(scheme.Scheme, "history-only-test-controller")
	eventsPod := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "events-recorded", UID: types.UID(framework.UniqueName("uid"))}
	eventsRecorder.Eventf(eventsPod, nil, corev1.EventTypeNormal, "Synced", "Sync", "synced %d objects", 3)
	regarding[eventsPod.Name] = "Synced"

	// No kube-controller-manager makes it: pods need their ServiceAccount.
	if _, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	unschedulable := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unschedulable", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none"}}},
	}
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, unschedulable, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	regarding[unschedulable.Name] = "FailedScheduling"

	// Every Event reaches kube-apiserver, then expires from it.
	events := c.client.CoreV1().Events(ns)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := events.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		seen := map[string]bool{}
		for _, e := range list.Items {
			seen[e.InvolvedObject.Name] = true
		}
		for name := range regarding {
			if !seen[name] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("not every recorder's Event reached kube-apiserver: %v", err)
	}
	// No scheduling retry may keep its Event alive past the TTL.
	_ = c.client.CoreV1().Pods(ns).Delete(ctx, "unschedulable", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := events.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if regarding[e.InvolvedObject.Name] != "" && e.Reason == regarding[e.InvolvedObject.Name] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the Events did not expire from kube-apiserver (--event-ttl=15s): %v", err)
	}

	for name, reason := range regarding {
		t.Run("kubectl get eventrecords regarding.name="+name, func(t *testing.T) {
			args := []string{"get", "eventrecords", "-n", ns, "--field-selector", "regarding.name=" + name + ",since=" + since}
			var out string
			err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
				stdout, _, err := framework.KubectlAt(t, framework.KubectlBinary(t), c.kube.KubeconfigPath, nil, args...)
				out = stdout
				return err == nil && strings.Contains(stdout, reason), nil
			})
			if err != nil {
				t.Fatalf("kubectl %s: no %s record: %v\n%s", strings.Join(args, " "), reason, err, out)
			}
			t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
			// The TTL's expiry reached capture as a watch DELETED.
			err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
				stdout, _, err := framework.KubectlAt(t, framework.KubectlBinary(t), c.kube.KubeconfigPath, nil, append(args, "-o", "jsonpath={.items[*].live}")...)
				out = stdout
				return err == nil && strings.Contains(stdout, "false") && !strings.Contains(stdout, "true"), nil
			})
			if err != nil {
				t.Errorf("records of the expired Event are not all marked deleted (live: %q): %v", out, err)
			}
		})
	}
	if !pod.LogContains(`"Starting Event history capture" source="kubernetes"`) {
		t.Errorf("the server did not capture from the Kubernetes API:\n%s", pod.Log())
	}
}

// startKubeScheduler runs _output/bin/kube-scheduler against kube until the
// test ends. hack/build-kube.sh builds it with kube-apiserver, so the test is
// skipped only where kube-apiserver would be missing too.
func startKubeScheduler(t *testing.T, kube *framework.KubeAPIServer) {
	t.Helper()
	bin := framework.KubeSchedulerBinary(t)
	dir := t.TempDir()
	p := &testbed.Process{Name: "kube-scheduler", Path: bin, LogPath: filepath.Join(dir, "kube-scheduler.log"), Args: []string{
		"--kubeconfig=" + kube.KubeconfigPath,
		"--authentication-kubeconfig=" + kube.KubeconfigPath,
		"--authorization-kubeconfig=" + kube.KubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", framework.FreePort(t)),
		"--cert-dir=" + dir,
	}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Logf("stopping kube-scheduler: %v", err)
		}
		if t.Failed() {
			t.Logf("kube-scheduler log:\n%s", p.Tail(40))
		}
	})
}

// apiTruth is every Event version and deletion kube-apiserver served, from
// the test's own watch: what history must hold.
type apiTruth struct {
	mu       sync.Mutex
	versions map[framework.VersionKey]*corev1.Event
	deleted  map[string]bool
	errs     []error
}

func watchAPITruth(t *testing.T, client kubernetes.Interface, ns string) *apiTruth {
	t.Helper()
	truth := &apiTruth{versions: map[framework.VersionKey]*corev1.Event{}, deleted: map[string]bool{}}
	list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			truth.mu.Lock()
			switch ev.Type {
			case watch.Added, watch.Modified:
				e := ev.Object.(*corev1.Event)
				truth.versions[framework.VersionKey{UID: string(e.UID), RV: e.ResourceVersion}] = e
			case watch.Deleted:
				truth.deleted[string(ev.Object.(*corev1.Event).UID)] = true
			case watch.Error:
				if ctx.Err() == nil {
					truth.errs = append(truth.errs, fmt.Errorf("truth watch: %v", ev.Object))
				}
			}
			truth.mu.Unlock()
		}
		if ctx.Err() == nil {
			truth.mu.Lock()
			truth.errs = append(truth.errs, errors.New("truth watch closed"))
			truth.mu.Unlock()
		}
	}()
	return truth
}

func (a *apiTruth) count(t *testing.T) int {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.errs) > 0 {
		t.Fatal(a.errs)
	}
	return len(a.versions)
}

// TestHistoryOnlyCrash: two history-only replicas on one PostgreSQL capture
// from kube-apiserver while Events are written through both APIs. One is
// SIGKILLed mid-capture and restarted: every version kube-apiserver served
// is in history exactly once. Then both stop, etcd is compacted past where
// they stood, and one restarts into a 410: it relists, and the versions
// missing from history are exactly as many as its lost-versions metric says.
func TestHistoryOnlyCrash(t *testing.T) {
	t.Parallel()
	ctx := framework.PollCtx(t)
	dsn := pgtest.Start(t)
	etcd := framework.StartEtcd(t)
	// Defaults, with one exception: kube-apiserver compacts etcd every 5
	// minutes by default; the test compacts it itself, when it chooses.
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{EtcdServers: etcd.ClientURL()})
	client := kube.Client(t)
	ns := framework.UniqueName("history-crash")
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	truth := watchAPITruth(t, client, ns)
	storeArgs := []string{"--history-store=postgres", "--history-dsn=" + dsn}
	first := framework.StartHistoryOnlyReplica(t, kube, storeArgs)
	second := framework.StartHistoryOnlyReplica(t, kube, storeArgs)

	w := framework.StartHistoryWriter(client, ns)
	defer w.Stop()
	waitVersions := func(what string, n int) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 90*time.Second, true, func(context.Context) (bool, error) {
			return truth.count(t) >= n, nil
		})
		if err != nil {
			t.Fatalf("%s: waiting for %d Event versions: %v (writer errors: %v)", what, n, err, w.Errors())
		}
	}
	waitVersions("before the kill", 60)
	if err := first.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	waitVersions("while the first replica is down", truth.count(t)+60)
	first.Start(t)
	if !strings.Contains(first.Proc.Tail(200), "Resuming Event history capture from the Kubernetes API") {
		t.Error("the restarted replica did not resume from the stored resourceVersion")
	}
	waitVersions("after the restart", truth.count(t)+60)

	// Both away; kube-apiserver goes on serving writes, then etcd forgets
	// them: a watch from where capture stood answers 410.
	if err := first.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := second.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	waitVersions("while both replicas are down", truth.count(t)+60)
	w.Stop()
	if errs := w.Errors(); len(errs) > 0 {
		t.Fatalf("writer: %v", errs)
	}
	etcdClient := etcd.Client(t)
	head, err := etcdClient.Get(ctx, "compact-me")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcdClient.Compact(ctx, head.Header.Revision); err != nil {
		t.Fatal(err)
	}
	first.Start(t)
	second.Start(t)
	if !strings.Contains(first.Proc.Tail(400), "410 Gone") && !strings.Contains(second.Proc.Tail(400), "410 Gone") {
		t.Errorf("no replica met a 410 after the compaction")
	}
	lost := first.Metric(t, `event_apiserver_history_capture_relist_lost_versions_total{source="kubernetes"}`) +
		second.Metric(t, `event_apiserver_history_capture_relist_lost_versions_total{source="kubernetes"}`)

	truth.mu.Lock()
	versions := make(map[framework.VersionKey]*corev1.Event, len(truth.versions))
	for k, v := range truth.versions {
		versions[k] = v
	}
	truth.mu.Unlock()
	t.Logf("kube-apiserver served %d versions; the relist's metric says %v lost", len(versions), lost)
	for name, r := range map[string]*framework.HistoryOnlyReplica{"killed and restarted": first, "beside it": second} {
		t.Run(name, func(t *testing.T) {
			var records []framework.VersionKey
			err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
				records = framework.RecordKeys(framework.ListAllEventRecords(t, r.Client, ns, "", 500))
				return float64(len(records)) >= float64(len(versions))-lost, nil
			})
			if err != nil {
				t.Errorf("history has %d records, kube-apiserver served %d versions, %v reported lost", len(records), len(versions), lost)
			}
			seen := map[framework.VersionKey]int{}
			for _, k := range records {
				seen[k]++
			}
			for k, n := range seen {
				if n != 1 {
					t.Errorf("version %v stored %d times", k, n)
				}
				if versions[k] == nil {
					t.Errorf("version %v is in history but kube-apiserver never served it", k)
				}
			}
			missing := 0
			for k := range versions {
				if seen[k] == 0 {
					missing++
				}
			}
			if float64(missing) != lost {
				t.Errorf("%d of %d versions missing from history, the metric reports %v lost", missing, len(versions), lost)
			}
			// Set-based selectors are served in this mode too, not only
			// beside the Events API.
			if inSet := framework.ListAllEventRecords(t, r.Client, ns, "metadata.namespace in ("+ns+")", 500); len(inSet) != len(records) {
				t.Errorf("metadata.namespace in (%s) listed %d records, the plain list %d", ns, len(inSet), len(records))
			}
		})
	}
}

// TestHistoryOnlyOverlaysDryRun: both history-only overlays render and pass
// a server-side dry run against a kube-apiserver v1.36.3 with its defaults
// (the PostgreSQL one is not run by the tests above).
func TestHistoryOnlyOverlaysDryRun(t *testing.T) {
	t.Parallel()
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	if _, err := kube.Client(t).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, overlay := range []string{"history-only", "history-only-postgres"} {
		t.Run(overlay, func(t *testing.T) {
			rendered := framework.RenderOverlay(t, filepath.Join("overlays", overlay))
			objs := framework.SplitManifests(t, rendered)
			deploy := &appsv1.Deployment{}
			framework.FromUnstructured(t, framework.FindObject(t, objs, "Deployment", "event-apiserver"), deploy)
			args := strings.Join(deploy.Spec.Template.Spec.Containers[0].Args, " ")
			if !strings.Contains(args, "--history-only") || strings.Contains(args, "--etcd") || strings.Contains(args, "--event-ttl") {
				t.Errorf("%s runs %s", overlay, args)
			}
			framework.FindObject(t, objs, "APIService", historyAPIService)
			path := framework.WriteFile(t, overlay+".yaml", string(rendered))
			stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil, "apply", "--dry-run=server", "-f", path)
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server: %v\n%s%s", err, stdout, stderr)
			}
		})
	}
}
