package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/cluster"
)

// managedGuidePath is the managed-cluster guide whose marked blocks
// TestManagedClusterGuide runs.
const managedGuidePath = "docs/managed-clusters.md"

// overlayImageTag is the event-apiserver tag deploy/base names, the one the
// guide's single install command pulls.
const overlayImageTag = "v0.0.0-dev"

// managedGuideHostDir is the hostPath PersistentVolume's directory the
// guide's prerequisites create.
const managedGuideHostDir = "/var/lib/event-apiserver-history"

// TestManagedClusterGuide runs docs/managed-clusters.md's marked blocks as
// they are written on a one-node cluster with kubeadm's defaults (the
// front-proxy flags on, nothing of kube-apiserver changed): the history-only
// overlay with its one command, the APIService Available, eventrecords and
// the timeline plugin. Then the kubelet's core/v1 Events and the
// scheduler's events.k8s.io/v1 Events about a new Deployment's pods reach
// `kubectl get eventrecords` through the aggregator, while kube-apiserver
// still serves Events itself. The uninstall keeps the claim; the Helm
// chart, installed on it, answers for that history and captures on; its
// uninstall keeps the claim too.
func TestManagedClusterGuide(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := guideBlocks(filepath.Join(root, managedGuidePath))
	if err != nil {
		t.Fatal(err)
	}
	// The guide's marked blocks: install and verify, the overlay's
	// uninstall, the move to the chart, the chart's uninstall.
	uninstall, helmInstall, helmUninstall := -1, -1, -1
	for i, b := range blocks {
		switch {
		case uninstall < 0 && strings.Contains(b.text, "kubectl delete apiservice"):
			uninstall = i
		case helmInstall < 0 && strings.Contains(b.text, "helm install"):
			helmInstall = i
		case helmUninstall < 0 && strings.Contains(b.text, "helm uninstall"):
			helmUninstall = i
		}
	}
	if uninstall < 1 || helmInstall <= uninstall || helmUninstall <= helmInstall {
		t.Fatalf("%s marks no install, uninstall, helm install and helm uninstall blocks in that order (found them at %d, %d, %d)", managedGuidePath, uninstall, helmInstall, helmUninstall)
	}
	reference, err := os.ReadFile(filepath.Join(root, "_output", "image", "reference"))
	if err != nil {
		t.Fatalf("%v: run hack/build-image.sh", err)
	}
	removeDir := func() {
		if err := os.RemoveAll(managedGuideHostDir); err != nil {
			t.Errorf("removing %s: %v", managedGuideHostDir, err)
		}
	}
	t.Cleanup(removeDir)
	removeDir()
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// What "where your nodes can pull it" means on this node: the image
	// this checkout built, under the tag the overlay names.
	loadImageAs(t, ctx, filepath.Join(root, "_output", "image", "event-apiserver.tar"), strings.TrimSpace(string(reference)), "event-apiserver:"+overlayImageTag)

	dir := guideDir(t, root)
	start := time.Now()
	runGuide(t, ctx, c, dir, blocks[:uninstall])
	t.Logf("the guide's install and verify blocks ran in %s", time.Since(start).Round(time.Second))
	if svc := mustKubectl(t, ctx, c, "get", "apiservice", "v1.events.k8s.io", "-o", "jsonpath={.spec.service}"); svc != "" {
		t.Fatalf("APIService v1.events.k8s.io is served by %s: the guide changed kube-apiserver's Events API", svc)
	}

	mustKubectl(t, ctx, c, "create", "namespace", "e2e")
	mustKubectl(t, ctx, c, "-n", "e2e", "create", "deployment", "web", "--image=registry.k8s.io/pause:3.10.2", "--replicas=2")
	mustKubectl(t, ctx, c, "-n", "e2e", "rollout", "status", "deployment/web", "--timeout=3m")
	// Scheduled: kube-scheduler through events.k8s.io/v1; Started: the
	// kubelet through core/v1. Both through the one watch of core/v1.
	t.Run("kubelet and scheduler Events in history", func(t *testing.T) {
		checkPodEvents(t, ctx, c, "e2e", "app=web")
		waitHistory(t, ctx, c, "e2e", "web-", "Scheduled", "Started")
	})

	checkUninstalled := func(how string) {
		t.Helper()
		if out, err := kubectl(ctx, c, "get", "apiservice", "v1alpha1.history.eventapiserver.io"); err == nil || !strings.Contains(out, "NotFound") {
			t.Errorf("after %s, the history APIService: %v %s", how, err, out)
		}
		if phase := mustKubectl(t, ctx, c, "-n", "event-apiserver", "get", "pvc", "event-apiserver-history", "-o", "jsonpath={.status.phase}"); phase != "Bound" {
			t.Errorf("after %s, the claim is %q, want it kept and Bound", how, phase)
		}
		if out := mustKubectl(t, ctx, c, "-n", "event-apiserver", "get", "deployments,services,serviceaccounts", "-l", "app.kubernetes.io/name=event-apiserver", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("after %s, still there:\n%s", how, out)
		}
	}
	runGuide(t, ctx, c, dir, blocks[uninstall:helmInstall])
	checkUninstalled("the overlay's uninstall")

	// The chart, installed on the kept claim, answers for what the overlay's
	// server captured and captures what follows.
	runGuide(t, ctx, c, dir, blocks[helmInstall:helmUninstall])
	t.Run("history kept from the overlay to the chart", func(t *testing.T) {
		waitHistory(t, ctx, c, "e2e", "web-", "Scheduled", "Started")
		mustKubectl(t, ctx, c, "-n", "e2e", "create", "deployment", "api", "--image=registry.k8s.io/pause:3.10.2")
		mustKubectl(t, ctx, c, "-n", "e2e", "rollout", "status", "deployment/api", "--timeout=3m")
		waitHistory(t, ctx, c, "e2e", "api-", "Scheduled", "Started")
	})
	runGuide(t, ctx, c, dir, blocks[helmUninstall:])
	checkUninstalled("helm uninstall")
}

// loadImageAs imports an image archive into the node's containerd, where
// the kubelet finds it, and tags its reference as name too.
func loadImageAs(t *testing.T, ctx context.Context, archive, reference, name string) {
	t.Helper()
	ctr := func(args ...string) {
		t.Helper()
		out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address=" + cluster.ContainerdSocket, "-n", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ctr("images", "import", archive)
	if reference != name {
		ctr("images", "tag", "--force", "docker.io/library/"+reference, "docker.io/library/"+name)
	}
}
