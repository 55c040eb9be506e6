package workload

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

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

// memorySamples: the heap moves with every GC cycle; the least of a few
// samples is closest to the live heap.
const (
	memorySamples  = 5
	memoryInterval = 400 * time.Millisecond
)

// SampleMemory reads the server's and etcd's RSS and the server's Go heap
// in use (the least of a few samples).
func SampleMemory(ctx context.Context, t Target) (MemorySample, error) {
	if t.ServerPID == 0 {
		return MemorySample{}, fmt.Errorf("memory needs the server's pid")
	}
	var s MemorySample
	for i := range memorySamples {
		if i > 0 {
			select {
			case <-ctx.Done():
				return s, ctx.Err()
			case <-time.After(memoryInterval):
			}
		}
		m, err := goMetrics(ctx, t.Config)
		if err != nil {
			return s, err
		}
		heap, ok := m["go_memstats_heap_inuse_bytes"]
		if !ok {
			return s, fmt.Errorf("no go_memstats_heap_inuse_bytes in /metrics")
		}
		if i == 0 || heap < s.HeapInuse {
			s.HeapInuse = heap
		}
		s.HeapLive = m["go_gc_heap_live_bytes"]
	}
	var err error
	if s.ServerRSS, err = testbed.RSS(t.ServerPID); err != nil {
		return s, err
	}
	if t.EtcdPID != 0 {
		if s.EtcdRSS, err = testbed.RSS(t.EtcdPID); err != nil {
			return s, err
		}
	}
	return s, nil
}

// goMetrics reads the Go runtime's gauges (go_*, unlabelled) from the
// server's /metrics.
func goMetrics(ctx context.Context, config *rest.Config) (map[string]int64, error) {
	c := rest.CopyConfig(config)
	c.GroupVersion = nil
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Host+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "go_") || strings.ContainsRune(name, '{') {
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
func MemoryMeasurements(events int, valueBytes float64, empty, loaded MemorySample) []Measurement {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	at := fmt.Sprintf(" @%d", events)
	out := []Measurement{
		{Workload: "memory", Metric: "server RSS" + at, Unit: "MiB", Value: mib(loaded.ServerRSS), Better: Lower, Count: int64(events)},
		{Workload: "memory", Metric: "server Go heap in use" + at, Unit: "MiB", Value: mib(loaded.HeapInuse), Better: Lower, Count: int64(events)},
		{Workload: "memory", Metric: "etcd RSS" + at, Unit: "MiB", Value: mib(loaded.EtcdRSS), Better: Info, Count: int64(events)},
		{Workload: "memory", Metric: "server RSS empty", Unit: "MiB", Value: mib(empty.ServerRSS), Better: Lower},
	}
	if loaded.HeapLive > 0 {
		out = append(out, Measurement{Workload: "memory", Metric: "server Go live heap" + at, Unit: "MiB", Value: mib(loaded.HeapLive), Better: Lower, Count: int64(events)})
	}
	if events > 0 {
		inuse := float64(loaded.HeapInuse-empty.HeapInuse) / float64(events)
		rss := float64(loaded.ServerRSS-empty.ServerRSS) / float64(events)
		out = append(out,
			Measurement{Workload: "memory", Metric: "heap in use growth per Event", Unit: "bytes", Value: inuse, Better: Lower, Count: int64(events)},
			Measurement{Workload: "memory", Metric: "RSS growth per Event", Unit: "bytes", Value: rss, Better: Lower, Count: int64(events)},
		)
		if loaded.HeapLive > 0 && empty.HeapLive > 0 {
			live := float64(loaded.HeapLive-empty.HeapLive) / float64(events)
			out = append(out, Measurement{Workload: "memory", Metric: "live heap growth per Event", Unit: "bytes", Value: live, Better: Lower, Count: int64(events)})
			if valueBytes > 0 {
				out = append(out, Measurement{Workload: "memory", Metric: "live heap growth / protobuf size", Unit: "x", Value: live / valueBytes, Better: Lower, Count: int64(events)})
			}
		}
		out = append(out, Measurement{Workload: "memory", Metric: "protobuf size per Event", Unit: "bytes", Value: valueBytes, Better: Info, Count: int64(events)})
	}
	return out
}
