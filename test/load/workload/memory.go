package workload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// MemorySample is a server's memory at one moment, and its etcd's.
type MemorySample struct {
	// ServerRSS and EtcdRSS are VmRSS from /proc/<pid>/status.
	ServerRSS, EtcdRSS int64
	// HeapInuse is go_memstats_heap_inuse_bytes from the server's /metrics:
	// live objects and garbage not yet swept.
	HeapInuse int64
	// HeapLive is go_gc_heap_live_bytes: the heap the last GC found live,
	// what a cache really costs.
	HeapLive int64
}

// The server is sampled every memoryInterval, at least memorySamples times:
// the heap moves with every GC cycle, and the least of a few samples is
// closest to the live heap.
const (
	memorySamples  = 5
	memoryInterval = 400 * time.Millisecond
)

// memoryCollections is how many GCs the server runs before it is sampled,
// memoryInterval apart. The Go runtime returns freed pages to the OS down to
// 10% above the heap in use when its last GC finished marking, which for a
// first forced GC still counts the garbage of the workload before it; after
// a second, that is the heap at rest, which an idle server reaches by itself
// within minutes (the runtime forces a GC every 2 minutes).
const memoryCollections = 2

// MemoryRest is how long the RSS must hold still before a sample is the
// server at rest. The runtime's scavenger returns the pages a GC freed at its
// own pace, about 1% of a core: over 100k Events, event-apiserver's RSS fell in
// steps for seconds after the second GC, and a sample read sooner moved by
// tens of MiB between restarts (docs/benchmarks-log.md, 2026-11-26 05:18). So
// sampling goes on until the RSS has not fallen by more than
// memoryRestSlack for the rest asked for, or for at most memoryRestLimit.
const (
	MemoryRest      = 3 * time.Second
	memoryRestSlack = 1 << 20
	memoryRestLimit = 30 * time.Second
)

// SampleMemory reads the server's and etcd's RSS and the server's Go heap
// in use, the server's at rest: it first has the server collect its
// garbage (the pprof heap endpoint's gc=1, on every server the bench runs;
// memoryCollections times), so that the live heap is the live heap now, not
// at a GC that ran before the last writes settled, then takes the least of
// samples until the RSS has held still for rest (MemoryRest; 0: the first
// memorySamples samples, for tests that measure nothing).
func SampleMemory(ctx context.Context, t Target, rest time.Duration) (MemorySample, error) {
	if t.ServerPID == 0 {
		return MemorySample{}, fmt.Errorf("memory needs the server's pid")
	}
	for i := range memoryCollections {
		if i > 0 {
			if err := sleep(ctx, memoryInterval); err != nil {
				return MemorySample{}, err
			}
		}
		if err := forceGC(ctx, t.Config); err != nil {
			return MemorySample{}, err
		}
	}
	var s MemorySample
	start := time.Now()
	// restSince is when the RSS last fell by more than memoryRestSlack.
	restSince, restRSS := start, int64(0)
	for i := 0; ; i++ {
		if i > 0 {
			if err := sleep(ctx, memoryInterval); err != nil {
				return s, err
			}
		}
		m, err := metricValues(ctx, t.Config, "go_")
		if err != nil {
			return s, err
		}
		heap, ok := m["go_memstats_heap_inuse_bytes"]
		if !ok {
			return s, fmt.Errorf("no go_memstats_heap_inuse_bytes in /metrics")
		}
		rss, err := testbed.RSS(t.ServerPID)
		if err != nil {
			return s, err
		}
		now := time.Now()
		if i == 0 || heap < s.HeapInuse {
			s.HeapInuse = heap
		}
		if i == 0 || rss < s.ServerRSS {
			s.ServerRSS = rss
		}
		if i == 0 || rss < restRSS-memoryRestSlack {
			restSince, restRSS = now, rss
		}
		s.HeapLive = m["go_gc_heap_live_bytes"]
		if i+1 >= memorySamples && now.Sub(restSince) >= rest || now.Sub(start) >= memoryRestLimit {
			break
		}
	}
	if t.EtcdPID != 0 {
		var err error
		if s.EtcdRSS, err = testbed.RSS(t.EtcdPID); err != nil {
			return s, err
		}
	}
	return s, nil
}

// sleep waits d, or returns the context's error if it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// get GETs path from the server and returns its body, or an error for
// any status but 200.
func get(ctx context.Context, config *rest.Config, path string) (io.ReadCloser, error) {
	c := rest.CopyConfig(config)
	c.GroupVersion = nil
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	return testbed.Get(ctx, client, c.Host+path)
}

// forceGC has the server run a full GC: the heap profile with gc=1, which
// kube-apiserver and event-apiserver both serve with --profiling (their
// default).
func forceGC(ctx context.Context, config *rest.Config) error {
	body, err := get(ctx, config, "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	_, err = io.Copy(io.Discard, body)
	return err
}

// metricValues reads the unlabelled metrics whose names start with prefix
// from the server's /metrics, or the one series prefix names with its labels.
func metricValues(ctx context.Context, config *rest.Config, prefix string) (map[string]int64, error) {
	body, err := get(ctx, config, "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	out := map[string]int64{}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, prefix) || (strings.ContainsRune(name, '{') && name != prefix) {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = int64(f)
		}
	}
	return out, sc.Err()
}

// MemoryMeasurements turns a sample after loading events Events (each
// valueBytes in etcd) and one of the empty server into measurements: the
// totals, and per Event the growth of heap and RSS over the empty server,
// also as a multiple of the protobuf size.
//
// when names the moment of the loaded sample in every metric ("" for the
// first, right after loading; e.g. " after restart"), and is left out of the
// empty server's RSS, which is not repeated then.
func MemoryMeasurements(events int, valueBytes float64, empty, loaded MemorySample, when string) []Measurement {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	at := fmt.Sprintf(" @%d", events) + when
	out := []Measurement{
		{Workload: "memory", Metric: "server RSS" + at, Unit: "MiB", Value: mib(loaded.ServerRSS), Better: Lower, Count: int64(events)},
		{Workload: "memory", Metric: "server Go heap in use" + at, Unit: "MiB", Value: mib(loaded.HeapInuse), Better: Lower, Count: int64(events)},
		{Workload: "memory", Metric: "etcd RSS" + at, Unit: "MiB", Value: mib(loaded.EtcdRSS), Better: Info, Count: int64(events)},
	}
	if when == "" {
		out = append(out, Measurement{Workload: "memory", Metric: "server RSS empty", Unit: "MiB", Value: mib(empty.ServerRSS), Better: Lower})
	}
	if loaded.HeapLive > 0 {
		out = append(out, Measurement{Workload: "memory", Metric: "server Go live heap" + at, Unit: "MiB", Value: mib(loaded.HeapLive), Better: Lower, Count: int64(events)})
	}
	if events > 0 {
		inuse := float64(loaded.HeapInuse-empty.HeapInuse) / float64(events)
		rss := float64(loaded.ServerRSS-empty.ServerRSS) / float64(events)
		out = append(out,
			Measurement{Workload: "memory", Metric: "heap in use growth per Event" + when, Unit: "bytes", Value: inuse, Better: Lower, Count: int64(events)},
			Measurement{Workload: "memory", Metric: "RSS growth per Event" + when, Unit: "bytes", Value: rss, Better: Lower, Count: int64(events)},
		)
		if loaded.HeapLive > 0 && empty.HeapLive > 0 {
			live := float64(loaded.HeapLive-empty.HeapLive) / float64(events)
			out = append(out, Measurement{Workload: "memory", Metric: "live heap growth per Event" + when, Unit: "bytes", Value: live, Better: Lower, Count: int64(events)})
			if valueBytes > 0 {
				out = append(out, Measurement{Workload: "memory", Metric: "live heap growth / protobuf size" + when, Unit: "x", Value: live / valueBytes, Better: Lower, Count: int64(events)})
			}
		}
		if when == "" {
			out = append(out, Measurement{Workload: "memory", Metric: "protobuf size per Event", Unit: "bytes", Value: valueBytes, Better: Info, Count: int64(events)})
		}
	}
	return out
}

// captureRevisionMetric is event-apiserver's newest etcd revision whose
// changes its history capture has stored.
const captureRevisionMetric = `event_apiserver_history_capture_revision{source="etcd"}`

// SettleCapture waits, at most limit, until event-apiserver's history
// capture has stored every change etcd (at endpoints) holds now, so that a
// memory sample after it does not count capture's in-flight queue (etcd
// watch responses and decoded Events waiting for SQLite, up to its 64 MiB
// budget). It returns how long it waited, and false for a server without
// capture (kube-apiserver, or history off), which it does not wait for.
// Call it only while nothing writes.
func SettleCapture(ctx context.Context, t Target, endpoints []string, limit time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	m, err := metricValues(ctx, t.Config, captureRevisionMetric)
	if err != nil {
		return 0, false, err
	}
	if _, ok := m[captureRevisionMetric]; !ok {
		return 0, false, nil
	}
	c, err := newEtcdClient(endpoints)
	if err != nil {
		return 0, true, err
	}
	defer func() { _ = c.Close() }()
	head, err := c.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		return 0, true, err
	}
	want := head.Header.Revision
	var got int64
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		m, err := metricValues(ctx, t.Config, captureRevisionMetric)
		if err != nil {
			return false, err
		}
		got = m[captureRevisionMetric]
		return got >= want, nil
	})
	if err != nil {
		return time.Since(start), true, fmt.Errorf("history capture at revision %d, etcd at %d after %v: %w", got, want, limit, err)
	}
	return time.Since(start), true, nil
}

// WaitCacheFilled waits, at most limit, until the server's Events watch
// cache has been filled since its start
// (apiserver_watch_cache_initializations_total{resource="events"} of at
// least 1). /readyz does not say so: it waits for the cache at most
// --storage-initialization-timeout (1 min), and event-apiserver serves LISTs
// from etcd meanwhile, so a restart over 10^6 Events is ready and serving
// before its cache holds them.
func WaitCacheFilled(ctx context.Context, t Target, limit time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		body, err := get(ctx, t.Config, "/metrics")
		if err != nil {
			return false, err
		}
		defer func() { _ = body.Close() }()
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "apiserver_watch_cache_initializations_total{") || !strings.Contains(line, `resource="events"`) {
				continue
			}
			_, value, _ := strings.Cut(line, "} ")
			if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && f >= 1 {
				return true, nil
			}
		}
		return false, sc.Err()
	})
}
