package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/test/load/workload"
)

// TestSmoke runs every workload once, at toy sizes, against event-apiserver
// (and kube-apiserver's default configuration when hack/build-kube.sh has
// built it), and the etcd ceiling against a real etcd. It checks that each
// workload did some work and saw no error; how fast is for hack/bench.sh.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and API servers")
	}
	servers := []string{EventServer}
	kube, err := testbed.KubeBinary("kube-apiserver")
	switch {
	case err == nil:
		servers = append([]string{KubeDefault}, servers...)
	case errors.Is(err, testbed.ErrNotBuilt):
		t.Logf("%v: running event-apiserver only", err)
	default:
		t.Fatal(err)
	}
	etcdBinary, err := testbed.EtcdBinary()
	if err != nil {
		t.Fatal(err)
	}

	o := Options{
		EtcdBinary:           etcdBinary,
		KubeAPIServerBinary:  kube,
		EventAPIServerBinary: buildEventAPIServer(t),
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
		RestCPU:              time.Second,
		// Unlike the benchmark, the test does not care about durability,
		// nor about the servers' memory at rest (MemoryRest 0: sampled at
		// once).
		EtcdUnsafeNoFsync: true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("bench: %v", err)
	}

	wantWorkloads := []string{"create", "recorder", "watch", "storm", "describe", "memory", "startup", "rest"}
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

// buildEventAPIServer builds this checkout's server into the test's
// directory, so as not to race other test binaries over _output/bin.
func buildEventAPIServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "event-apiserver")
	if err := testbed.BuildServer(bin, false); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestEtcdProgressNotifyIntervalIsTheServers pins the benchmark's etcd
// interval to the one event-apiserver's embedded etcd and watch resume
// assume, without the load tool linking pkg/etcd.
func TestEtcdProgressNotifyIntervalIsTheServers(t *testing.T) {
	if etcdProgressNotifyInterval != etcd.DefaultProgressNotifyInterval {
		t.Fatalf("benchmark etcds run with --watch-progress-notify-interval=%v, pkg/etcd assumes %v",
			etcdProgressNotifyInterval, etcd.DefaultProgressNotifyInterval)
	}
}

// TestSmokeDoor runs the writing workloads and describe through the front
// door (D and E) at tiny sizes, and checks that they did some work, saw no
// error, and fill the table's door section.
func TestSmokeDoor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, API servers and nginx")
	}
	if _, err := testbed.NginxBinary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	kube, err := testbed.KubeBinary("kube-apiserver")
	if errors.Is(err, testbed.ErrNotBuilt) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	etcdBinary, err := testbed.EtcdBinary()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		EtcdBinary: etcdBinary, KubeAPIServerBinary: kube, EventAPIServerBinary: buildEventAPIServer(t),
		EventAPIServerArgs: []string{"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0", "--event-rate-limit-global-qps=0"},
		Servers:            []string{DoorKube, DoorEvents}, Rounds: 1, Sizes: []int{100},
		Layout: workload.DefaultLayout, Clients: 2, Duration: 500 * time.Millisecond,
		Workloads:        []string{WorkloadRecorder, WorkloadDescribe},
		DescribeRequests: 3, DescribeTime: time.Second, WorkDir: t.TempDir(), EtcdUnsafeNoFsync: true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	for _, r := range res.Runs {
		did := map[string]int64{}
		for _, m := range r.Measurements {
			did[m.Workload] += m.Count
			if m.Errors != 0 {
				t.Errorf("%s: %s: %d errors", r.Server, m.Key(), m.Errors)
			}
		}
		for _, w := range []string{"recorder", "describe"} {
			if did[w] == 0 {
				t.Errorf("%s: workload %s reported no operations", r.Server, w)
			}
		}
	}
	if table := res.Markdown(); !strings.Contains(table, "| E/A (the door) |") || !strings.Contains(table, "| recorder |") {
		t.Errorf("table lacks the door section:\n%s", table)
	}
}
