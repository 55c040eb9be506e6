package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/cmd/event-load/workload"
	"github.com/eventapiserver/event-apiserver/internal/proc"
)

// TestSmoke runs every workload once, at toy sizes, against event-apiserver
// (and kube-apiserver's default configuration when hack/build-kube.sh has
// built it), and the etcd ceiling against a real etcd. It checks that each
// workload did some work and saw no error; how fast is for hack/bench.sh.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and API servers")
	}
	root, err := proc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	servers := []string{EventServer}
	kube := filepath.Join(root, "_output", "bin", "kube-apiserver")
	if _, err := os.Stat(kube); err == nil {
		servers = append([]string{KubeDefault}, servers...)
	} else {
		t.Logf("kube-apiserver not built (hack/build-kube.sh): running event-apiserver only")
	}

	o := Options{
		EtcdBinary:           buildEtcd(t, root),
		KubeAPIServerBinary:  kube,
		EventAPIServerBinary: buildEventAPIServer(t, root),
		EventAPIServerArgs:   []string{"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0", "--event-rate-limit-global-qps=0"},
		Servers:              servers,
		Rounds:               1,
		Sizes:                []int{100, 200},
		Layout:               workload.DefaultLayout,
		Clients:              2,
		Duration:             500 * time.Millisecond,
		Watchers:             5,
		AllWatchers:          1,
		WatchRate:            40,
		StormClients:         4,
		StormRate:            400,
		DescribeRequests:     3,
		DescribeTime:         time.Second,
		WorkDir:              t.TempDir(),
		// Unlike the benchmark, the test does not care about durability.
		EtcdUnsafeNoFsync: true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("bench: %v", err)
	}

	wantWorkloads := []string{"create", "recorder", "watch", "storm", "describe", "memory", "startup"}
	for _, s := range append([]string{Ceiling}, servers...) {
		t.Run(s, func(t *testing.T) {
			var runs []RunResult
			for _, r := range res.Runs {
				if r.Server == s {
					runs = append(runs, r)
				}
			}
			if len(runs) != 1 {
				t.Fatalf("%d runs, want 1", len(runs))
			}
			did := map[string]int64{}
			for _, m := range runs[0].Measurements {
				t.Log(m.String())
				did[m.Workload] += m.Count
				if m.Errors != 0 {
					t.Errorf("%s: %d errors", m.Key(), m.Errors)
				}
			}
			want := wantWorkloads
			if s == Ceiling {
				want = []string{"etcd-ceiling"}
			}
			for _, w := range want {
				if did[w] == 0 {
					t.Errorf("workload %s reported no operations", w)
				}
			}
		})
	}

	if table := res.Markdown(); !strings.Contains(table, "| create | core/v1 protobuf | events/s ↑ |") {
		t.Errorf("table lacks the create row:\n%s", table)
	}
	if svg := res.DescribeChartSVG(); !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, "<polyline") {
		t.Errorf("chart has no lines:\n%s", svg)
	}
}

// buildEtcd runs hack/build-etcd.sh (instant when its binary is current).
func buildEtcd(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "build-etcd.sh"))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/build-etcd.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// buildEventAPIServer builds this checkout's server into the test's
// directory, so as not to race other tests over _output/bin.
func buildEventAPIServer(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "event-apiserver")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/event-apiserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building event-apiserver: %v\n%s", err, out)
	}
	return bin
}
