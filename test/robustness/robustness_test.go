package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/robustness/checker"
)

// TestRobustness runs seeded traffic against two event-apiserver replicas
// over a three-member etcd while faults are injected (replica and etcd
// member kills, the leader's included; partitions of a member from its
// peers, from the servers, or both; compaction; defragmentation), then
// holds everything recorded to the checker's properties. The seed is
// printed; -seed reruns one.
func TestRobustness(t *testing.T) {
	t.Parallel()
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("seed %d (again: go test ./test/robustness -run TestRobustness -v -args -seed=%d)", seed, seed)
	rngFor := func(stream uint64) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), stream)) }

	if *writersFlag < 1 || *writersFlag > 100 {
		t.Fatalf("-writers=%d: from 1 to 100", *writersFlag)
	}
	if *watchersFlag < 0 || *watchersFlag > 20 {
		t.Fatalf("-extra-watchers=%d: from 0 to 20", *watchersFlag)
	}
	started := time.Now()
	c := startCluster(t)
	ctx := context.Background()
	base, err := c.etcdClient.Get(ctx, "robustness-base-revision")
	if err != nil {
		t.Fatal(err)
	}
	baseRev := base.Header.Revision
	recCtx, stopRecorder := context.WithCancel(ctx)
	defer stopRecorder()
	rec := startRecorder(recCtx, c.etcdClient, baseRev)

	tr := newTraffic(t, c)
	watchCtx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	watchers := []*watcher{
		{tr: tr, rec: checker.Watcher{Name: "all-namespaces"}},
		{tr: tr, rec: checker.Watcher{Name: "warnings", Selector: map[string]string{"type": "Warning"}}},
		{tr: tr, rec: checker.Watcher{Name: "ns-1-backoff", Namespace: "ns-1", Selector: map[string]string{"reason": "BackOff"}}},
	}
	t.Logf("traffic and faults for %v", *durationFlag)
	trafficCtx, stopTraffic := context.WithTimeout(ctx, *durationFlag)
	defer stopTraffic()
	watchers = append(watchers, &watcher{tr: tr, rec: checker.Watcher{Name: "away-now-and-then"}, awayUntil: trafficCtx})
	for i := range *watchersFlag {
		watchers = append(watchers, &watcher{tr: tr, rec: checker.Watcher{Name: fmt.Sprintf("all-namespaces-%d", i+2)}})
	}
	var watching sync.WaitGroup
	for i, w := range watchers {
		watching.Go(func() { w.run(watchCtx, rngFor(100+uint64(i))) })
	}
	var load sync.WaitGroup
	for i := range *writersFlag {
		// Streams 50 and up are the lister's, watchers' and faults'.
		stream := uint64(i)
		if i >= 50 {
			stream = 1000 + uint64(i)
		}
		load.Go(func() { tr.writer(trafficCtx, i, rngFor(stream)) })
	}
	load.Go(func() { tr.lister(trafficCtx, rngFor(50)) })
	load.Go(func() { c.injectFaults(trafficCtx, rngFor(200), rec.Progress) })
	load.Wait()
	if t.Failed() {
		return
	}

	// Settle: every watcher must reach the revision etcd is at once the
	// traffic stopped.
	end, err := c.etcdClient.Get(ctx, "robustness-end-revision")
	if err != nil {
		t.Fatal(err)
	}
	endRev := end.Header.Revision
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		for _, w := range watchers {
			if w.position() < endRev {
				return false, nil
			}
		}
		return rec.Progress() >= endRev, nil
	})
	if err != nil {
		for _, w := range watchers {
			t.Logf("watcher %s at rv %d of %d", w.rec.Name, w.position(), endRev)
		}
		t.Logf("etcd recorder at rv %d of %d", rec.Progress(), endRev)
		t.Errorf("watchers did not reach the final revision: %v", err)
	}
	stopWatchers()
	watching.Wait()
	stopRecorder()
	<-rec.done
	revisions, recErr := rec.result()
	if recErr != nil {
		t.Fatal(recErr)
	}

	// Each replica's Event history must come to hold every version etcd
	// held; it is written in batches, so it is waited for.
	var histories []checker.HistoryStore
	puts := map[checker.HistoryRecord]bool{}
	for _, rev := range revisions {
		if rev.Type == checker.Put {
			puts[checker.HistoryRecord{Key: rev.Key, RV: rev.Rev}] = true
		}
	}
	for replica := range c.servers {
		var store checker.HistoryStore
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			var err error
			if store, err = tr.history(replica); err != nil {
				t.Logf("%v", err)
				return false, nil
			}
			held := 0
			for _, rec := range store.Records {
				if puts[rec] {
					held++
				}
			}
			return held >= len(puts) || store.Relisted, nil
		})
		if err != nil {
			t.Logf("replica %d's history still lacks versions after a minute (the checker lists them)", replica)
		}
		histories = append(histories, store)
	}

	tr.mu.Lock()
	h := &checker.History{Histories: histories,
		Seed: seed, RequestTimeout: requestTimeout, BaseRev: baseRev, Revisions: revisions,
		Compactions: c.compactions, Ops: tr.ops, Faults: c.faults,
	}
	tr.mu.Unlock()
	for _, w := range watchers {
		h.Watchers = append(h.Watchers, w.rec)
	}
	report := checker.Check(h)
	t.Logf("wall %v, Event history on %s\n%s", time.Since(started).Round(time.Second), c.historyStore, report)
	if !report.OK() {
		t.Errorf("seed %d broke %v", seed, report.Broken())
	}
}
