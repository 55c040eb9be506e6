package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// BenchmarkWrite measures the store's cost per Event version, written as
// capture writes them (batches of 500, one transaction each, random uids
// and several Events per object), on a store that already holds some.
//
//	go test -run NONE -bench Write -benchtime 20000x ./pkg/history/sqlite/
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "history.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := make([]byte, 700)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	now := time.Now()
	version := func(j int) history.Version {
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
	const preload = 50000
	for i := 0; i < preload; i += batchSize {
		write(i, i+batchSize)
	}
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i += batchSize {
		write(preload+i, preload+min(i+batchSize, b.N))
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
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
