// Package workload holds the load the benchmark applies to an Events API
// server (create, recorder, describe, watch), the measurements it takes of
// the server (memory) and of etcd alone (ceiling), and the direct etcd
// writes that preload a store in the servers' own layout.
package workload

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Better says which way a Measurement improves.
type Better string

const (
	Higher Better = "higher"
	Lower  Better = "lower"
	// Info is a number to read beside the others, not a score.
	Info Better = "info"
)

// Measurement is one number a workload reports, with the operations behind
// it.
type Measurement struct {
	// Workload is the workload's name: create, recorder, describe, watch,
	// memory, startup, etcd-ceiling.
	Workload string `json:"workload"`
	// Metric names the number within the workload, e.g.
	// "core/v1 protobuf" or "describe pod @10000 p50".
	Metric string  `json:"metric"`
	Unit   string  `json:"unit"`
	Value  float64 `json:"value"`
	Better Better  `json:"better"`
	// Count is how many operations (requests, deliveries, events) the
	// value rests on; Errors how many of them failed.
	Count  int64 `json:"count"`
	Errors int64 `json:"errors"`
}

// Key identifies the row a Measurement belongs to.
func (m Measurement) Key() string { return m.Workload + " " + m.Metric }

func (m Measurement) String() string {
	return fmt.Sprintf("%-12s %-40s %12.3f %-10s (n=%d, errors=%d)", m.Workload, m.Metric, m.Value, m.Unit, m.Count, m.Errors)
}

// Latencies collects durations from many goroutines.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Len is the number of durations recorded.
func (l *Latencies) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Percentile returns the p-th percentile (0 < p <= 100, nearest rank), or
// 0 when nothing was recorded.
func (l *Latencies) Percentile(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), l.d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.999999) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
