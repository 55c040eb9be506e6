package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// BenchmarkWrite measures the store's cost per Event version, written as
// capture writes them (batches of 500, one transaction each), on a store
// that already holds some: "spread", random uids and several Events per
// object over 100 namespaces, 50,000 versions before; "capturecpu",
// TestHistoryCaptureCPU's Events (one namespace, one regarding uid, 100
// pods), 300 before; "spread-namespaced", spread with the triggers of the
// hourly counts alone, as before the counts of all namespaces
// (hourlyAllSQL): the difference is what those add.
//
//	go test -run NONE -bench Write -benchtime 20000x ./pkg/history/sqlite/
func BenchmarkWrite(b *testing.B) {
	payload := make([]byte, 700)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	now := time.Now()
	spread := func(j int) history.Version {
		object := j % 10000
		return history.Version{
			UID: fmt.Sprintf("%08x-6a3b-4c1d-9e2f-%012x", j*2654435761%(1<<32), j), Revision: int64(j + 1),
			Namespace: fmt.Sprintf("ns-%d", object%100), Name: fmt.Sprintf("pod-%d.%016x", object, j),
			RegardingUID:  fmt.Sprintf("%08x-1111-2222-3333-%012x", object*2654435761%(1<<32), object),
			RegardingName: fmt.Sprintf("pod-%d", object), RegardingNamespace: fmt.Sprintf("ns-%d", object%100),
			RegardingKind: "Pod", Reason: "BackOff", Type: "Warning", ReportingController: "kubelet",
			LastSeen: now.Add(time.Duration(j) * time.Millisecond), ObservedAt: now.Add(time.Duration(j) * time.Millisecond),
			Object: payload,
		}
	}
	b.Run("spread", func(b *testing.B) { benchmarkWrite(b, 50000, "", spread) })
	// On the empty store: hourlySQL's backfill counts nothing.
	b.Run("spread-namespaced", func(b *testing.B) {
		benchmarkWrite(b, 50000, `DROP TRIGGER versions_hourly_counted; DROP TRIGGER versions_hourly_uncounted;`+hourlySQL(), spread)
	})
	b.Run("capturecpu", func(b *testing.B) {
		benchmarkWrite(b, 300, "", func(j int) history.Version {
			return history.Version{
				UID: fmt.Sprintf("%08x-6a3b-4c1d-9e2f-%012x", j*2654435761%(1<<32), j), Revision: int64(j + 1),
				Namespace: "bench-1234", Name: fmt.Sprintf("measured-%d", j),
				RegardingUID: "uid", RegardingName: fmt.Sprintf("pod-%d", j%100), RegardingNamespace: "bench-1234",
				RegardingKind: "Pod", Reason: "BackOff", Type: "Warning", ReportingController: "kubelet",
				LastSeen: now.Add(time.Duration(j) * time.Millisecond), ObservedAt: now.Add(time.Duration(j) * time.Millisecond),
				Object: payload[:550],
			}
		})
	})
}

// benchmarkWrite measures version(preload...) written into a store that
// holds version(0...preload), after setup (if not empty) on the new store.
func benchmarkWrite(b *testing.B, preload int, setup string, version func(j int) history.Version) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "history.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if setup != "" {
		if _, err := s.db.ExecContext(ctx, setup); err != nil {
			b.Fatal(err)
		}
	}
	const batchSize = 500
	write := func(from, to int) {
		batch := history.Batch{Source: "bench", Revision: int64(to)}
		for j := from; j < to; j++ {
			batch.Versions = append(batch.Versions, version(j))
		}
		if err := s.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < preload; i += batchSize {
		write(i, min(i+batchSize, preload))
	}
	// Start from an empty WAL, and end with what was written checkpointed:
	// a checkpoint's cost belongs to the versions it copies, whatever
	// wal_autocheckpoint says.
	checkpoint := func() {
		if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
	}
	checkpoint()
	b.ResetTimer()
	cpu0, written0 := processCPU(b), bytesWritten(b)
	for i := 0; i < b.N; i += batchSize {
		write(preload+i, preload+min(i+batchSize, b.N))
	}
	checkpoint()
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(bytesWritten(b)-written0)/float64(b.N), "written-B/op")
}

// bytesWritten is what the process has written to files so far (wchar).
func bytesWritten(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no wchar in /proc/self/io")
	return 0
}

// processCPU is the process's user and system CPU time so far: wall time
// per op also counts waiting for fsync.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
