package workload

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdProposalsMetric counts the raft proposals etcd has committed: every
// write, and the lease checkpoints, which write no revision.
const etcdProposalsMetric = "etcd_server_proposals_committed_total"

// RestCPU measures a server and its etcd at rest for d, once its cache is
// filled, its history capture settled and its memory sampled: the CPU each uses a second (the server's
// own background work: bookmarks, progress requests, the TTL backstop's
// passes and revision clock, history capture's progress), and what etcd
// writes meanwhile, in revisions and in raft proposals a second (lease
// checkpoints are proposals that write no revision, which the difference
// shows). Events is the store's size, for the metric names; when says after
// what, as MemoryMeasurements does.
func RestCPU(ctx context.Context, t Target, etcdURL string, events int, d time.Duration, when string) ([]Measurement, error) {
	c, err := newEtcdClient([]string{etcdURL})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	revision := func() (int64, error) {
		resp, err := c.Get(ctx, "/", clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return resp.Header.Revision, nil
	}
	rev0, err := revision()
	if err != nil {
		return nil, err
	}
	proposals0, err := etcdMetric(ctx, etcdURL, etcdProposalsMetric)
	if err != nil {
		return nil, err
	}
	cpu := t.startCPU()
	start := time.Now()
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	server, sok := cpu.serverUsed()
	etcd, eok := cpu.etcdUsed()
	elapsed := time.Since(start).Seconds()
	rev1, err := revision()
	if err != nil {
		return nil, err
	}
	proposals1, err := etcdMetric(ctx, etcdURL, etcdProposalsMetric)
	if err != nil {
		return nil, err
	}
	at := fmt.Sprintf(" @%d", events) + when
	perSecond := func(v float64) float64 { return v / elapsed }
	var out []Measurement
	if sok {
		out = append(out, Measurement{Workload: "rest", Metric: "server CPU" + at, Unit: "ms/s", Value: perSecond(float64(server.Microseconds()) / 1000), Better: Lower, Count: int64(events)})
	}
	if eok {
		out = append(out, Measurement{Workload: "rest", Metric: "etcd CPU" + at, Unit: "ms/s", Value: perSecond(float64(etcd.Microseconds()) / 1000), Better: Lower, Count: int64(events)})
	}
	return append(out,
		Measurement{Workload: "rest", Metric: "etcd revisions" + at, Unit: "/s", Value: perSecond(float64(rev1 - rev0)), Better: Info, Count: int64(events)},
		Measurement{Workload: "rest", Metric: "etcd raft proposals" + at, Unit: "/s", Value: perSecond(proposals1 - proposals0), Better: Info, Count: int64(events)},
		Measurement{Workload: "rest", Metric: "seconds at rest" + at, Unit: "s", Value: elapsed, Better: Info, Count: int64(events)},
	), nil
}

// etcdMetric reads one unlabelled metric from etcd's /metrics.
func etcdMetric(ctx context.Context, etcdURL, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdURL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s/metrics: %s", etcdURL, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if value, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(value), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in %s/metrics", name, etcdURL)
}
