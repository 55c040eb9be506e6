// Package cluster_test is the real-kubelet end-to-end tier: a one-node
// Kubernetes v1.36.3 cluster (internal/cluster: kubeadm, a kubelet on
// containerd, kube-proxy, CoreDNS) on this machine. It needs root and runs
// in its own phase of hack/test.sh, after the integration tier.
package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/internal/cluster"
)

func startCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the real-kubelet tier needs root (kubelet, containerd, iptables): hack/test.sh runs it as root in CI")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Logf: t.Logf, KeepDir: os.Getenv("EACLUSTER_KEEP_DIR") != ""})
	if err != nil {
		t.Fatal(err)
	}
	if wild, err := wildcardListeners(); err != nil {
		t.Errorf("listing listeners: %v", err)
	} else if len(wild) > 0 {
		t.Errorf("the cluster listens on wildcard addresses, which take the port on every address, 127.0.0.x included, from the tests that run beside it:\n%s", strings.Join(wild, "\n"))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, args := range [][]string{{"get", "pods", "-A", "-o", "wide"}, {"get", "events", "-A"}} {
				out, _ := kubectl(context.Background(), c, args...)
				t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
			}
			t.Logf("cluster logs are in %s (kept with EACLUSTER_KEEP_DIR=1)", c.Dir())
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return c
}

// clusterCommands are the host processes a cluster runs: the control
// plane's static pods (host network), the kubelet, kube-proxy, containerd.
var clusterCommands = []string{"kube-apiserver", "etcd", "kube-controller", "kube-scheduler", "kubelet", "kube-proxy", "containerd"}

// wildcardListeners are the TCP listeners of the cluster's processes on a
// wildcard address (0.0.0.0, ::, *), as `ss -ltnp` shows them. Every one of
// them is bound to the node's address instead (internal/cluster's
// kubeadmConfig).
func wildcardListeners() ([]string, error) {
	out, err := exec.Command("ss", "-ltnpH").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ss -ltnpH: %w: %s", err, out)
	}
	var wild []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		host := f[3][:strings.LastIndex(f[3], ":")]
		if host != "0.0.0.0" && host != "[::]" && host != "*" {
			continue
		}
		for _, c := range clusterCommands {
			if strings.Contains(f[5], `(("`+c) {
				wild = append(wild, line)
				break
			}
		}
	}
	return wild, nil
}

// kubectl runs kubectl v1.36.3 against the cluster as its admin.
func kubectl(ctx context.Context, c *cluster.Cluster, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Kubectl(), args...)
	cmd.Env = c.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func mustKubectl(t *testing.T, ctx context.Context, c *cluster.Cluster, args ...string) string {
	t.Helper()
	out, err := kubectl(ctx, c, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventsOfPod is who reported what about a pod through each Events API:
// reason -> reporting component.
type eventsOfPod struct {
	core, events map[string]string
}

func (e eventsOfPod) has(reasons map[string]string) error {
	for reason, component := range reasons {
		if got := e.core[reason]; got != component {
			return fmt.Errorf("core/v1: %s by %q, want by %q (have %v)", reason, got, component, e.core)
		}
		if got := e.events[reason]; got != component {
			return fmt.Errorf("events.k8s.io/v1: %s by %q, want by %q (have %v)", reason, got, component, e.events)
		}
	}
	return nil
}

func podEvents(ctx context.Context, c *cluster.Cluster, ns, pod string) (eventsOfPod, error) {
	e := eventsOfPod{core: map[string]string{}, events: map[string]string{}}
	out, err := kubectl(ctx, c, "-n", ns, "get", "events", "--field-selector=involvedObject.kind=Pod,involvedObject.name="+pod, "-o", "json")
	if err != nil {
		return e, err
	}
	var core struct {
		Items []struct {
			Reason string `json:"reason"`
			Source struct {
				Component string `json:"component"`
			} `json:"source"`
			ReportingComponent string `json:"reportingComponent"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &core); err != nil {
		return e, err
	}
	for _, ev := range core.Items {
		e.core[ev.Reason] = ev.ReportingComponent
		if ev.ReportingComponent == "" {
			e.core[ev.Reason] = ev.Source.Component
		}
	}
	out, err = kubectl(ctx, c, "-n", ns, "get", "events.events.k8s.io", "--field-selector=regarding.kind=Pod,regarding.name="+pod, "-o", "json")
	if err != nil {
		return e, err
	}
	var v1 struct {
		Items []struct {
			Reason              string `json:"reason"`
			ReportingController string `json:"reportingController"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &v1); err != nil {
		return e, err
	}
	for _, ev := range v1.Items {
		e.events[ev.Reason] = ev.ReportingController
	}
	return e, nil
}

// TestRealKubeletEvents runs a Deployment on the real cluster and finds the
// Events the scheduler and the kubelet wrote about one of its pods through
// both Events APIs, in `kubectl describe pod` and in `kubectl events`: the
// tier's base, with kube-apiserver serving both APIs itself.
func TestRealKubeletEvents(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	mustKubectl(t, ctx, c, "create", "namespace", "e2e")
	mustKubectl(t, ctx, c, "-n", "e2e", "create", "deployment", "web", "--image=registry.k8s.io/pause:3.10.2", "--replicas=2")
	mustKubectl(t, ctx, c, "-n", "e2e", "rollout", "status", "deployment/web", "--timeout=3m")
	checkPodEvents(t, ctx, c, "e2e", "app=web")
}

// checkPodEvents finds the Events the scheduler and the kubelet wrote about
// one of the pods the selector matches through both Events APIs, in
// `kubectl describe pod` and in `kubectl events`.
func checkPodEvents(t *testing.T, ctx context.Context, c *cluster.Cluster, ns, selector string) {
	t.Helper()
	pod := strings.Fields(mustKubectl(t, ctx, c, "-n", ns, "get", "pods", "-l", selector, "-o", "jsonpath={.items[0].metadata.name}"))[0]
	want := map[string]string{"Scheduled": "default-scheduler", "Pulled": "kubelet", "Created": "kubelet", "Started": "kubelet"}
	var last error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		e, err := podEvents(ctx, c, ns, pod)
		if err != nil {
			last = err
			return false, nil
		}
		last = e.has(want)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the scheduler's and the kubelet's Events about pod %s: %v (last: %v)", pod, err, last)
	}

	describe := mustKubectl(t, ctx, c, "-n", ns, "describe", "pod", pod)
	_, events, ok := strings.Cut(describe, "\nEvents:")
	if !ok {
		t.Fatalf("kubectl describe pod has no Events section:\n%s", describe)
	}
	for reason, component := range want {
		if !containsLine(events, reason, component) {
			t.Errorf("kubectl describe pod: no %s Event from %s in:\n%s", reason, component, events)
		}
	}
	forPod := mustKubectl(t, ctx, c, "-n", ns, "events", "--for=pod/"+pod)
	for reason := range want {
		if !containsLine(forPod, reason, "Pod/"+pod) {
			t.Errorf("kubectl events --for=pod/%s: no %s Event in:\n%s", pod, reason, forPod)
		}
	}
}

// containsLine reports whether one line of out holds every word.
func containsLine(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, w := range words {
			if !strings.Contains(line, w) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
