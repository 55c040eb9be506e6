package process

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/proc"
	"github.com/eventapiserver/event-apiserver/pkg/etcd"
)

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
	*proc.Process
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
		ports, err := proc.FreePorts(2)
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
			// kubeadm's value, so both servers' watch caches see bookmarks at
			// the pace a production etcd gives them.
			"--watch-progress-notify-interval=" + etcd.DefaultProgressNotifyInterval.String(),
			"--quota-backend-bytes=" + strconv.Itoa(8<<30),
			"--log-level=warn",
		}
		if o.UnsafeNoFsync {
			args = append(args, "--unsafe-no-fsync")
		}
		e := &Etcd{
			Process: &proc.Process{Name: "etcd", Path: o.Binary, Args: args, LogPath: filepath.Join(o.Dir, "etcd.log")},
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
		return proc.EtcdHealth(client, e.URL)
	})
}

// poll is p.Poll that ends its error with the tail of p's log.
func poll(ctx context.Context, interval time.Duration, p *proc.Process, f func() error) error {
	if err := p.Poll(ctx, interval, f); err != nil {
		return fmt.Errorf("%s not ready: %w\n%s", p.Name, err, p.Tail(30))
	}
	return nil
}
