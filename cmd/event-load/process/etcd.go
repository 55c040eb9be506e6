package process

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// EtcdProgressNotifyInterval is what kubeadm passes etcd
// (--watch-progress-notify-interval=5s); both servers' watch caches see
// bookmarks at that pace.
const EtcdProgressNotifyInterval = 5 * time.Second

// EtcdOptions configures StartEtcd.
type EtcdOptions struct {
	// Binary is the etcd executable (hack/build-etcd.sh).
	Binary string
	// Dir holds the data directory and the log; it is created.
	Dir string
	// UnsafeNoFsync passes --unsafe-no-fsync. Off by default: a benchmark
	// measures etcd as it runs in production, with fsync.
	UnsafeNoFsync bool
}

// Etcd is a single-member etcd on loopback.
type Etcd struct {
	*Process
	// URL is the client URL, http://127.0.0.1:<port>.
	URL string
}

// StartEtcd starts a fresh single-member etcd and waits until it is healthy.
func StartEtcd(ctx context.Context, o EtcdOptions) (*Etcd, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		ports, err := FreePorts(2)
		if err != nil {
			return nil, err
		}
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		args := []string{
			"--name=default",
			"--data-dir=" + filepath.Join(o.Dir, fmt.Sprintf("data-%d", attempt)),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			"--initial-cluster-state=new",
			"--watch-progress-notify-interval=" + EtcdProgressNotifyInterval.String(),
			"--quota-backend-bytes=" + strconv.Itoa(8<<30),
			"--log-level=warn",
		}
		if o.UnsafeNoFsync {
			args = append(args, "--unsafe-no-fsync")
		}
		e := &Etcd{
			Process: &Process{Name: "etcd", Path: o.Binary, Args: args, LogPath: filepath.Join(o.Dir, "etcd.log")},
			URL:     client,
		}
		if err := e.Start(); err != nil {
			return nil, err
		}
		if lastErr = e.waitHealthy(ctx, time.Minute); lastErr == nil {
			return e, nil
		}
		_ = e.Stop()
		if !e.LogContains("address already in use") {
			break
		}
	}
	return nil, lastErr
}

func (e *Etcd) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 3 * time.Second}
	return poll(ctx, 100*time.Millisecond, e.Process, func() error {
		resp, err := client.Get(e.URL + "/health")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var h struct{ Health string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Health != "true" {
			return fmt.Errorf("etcd /health: %d %s", resp.StatusCode, body)
		}
		return nil
	})
}

// poll calls f every interval until it succeeds, ctx ends, or p exits.
func poll(ctx context.Context, interval time.Duration, p *Process, f func() error) error {
	var last error
	for {
		if !p.Running() {
			return fmt.Errorf("%s %s\n%s", p.Name, p.Exited(), p.Tail(30))
		}
		if last = f(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last error: %v)\n%s", p.Name, ctx.Err(), last, p.Tail(30))
		case <-time.After(interval):
		}
	}
}
