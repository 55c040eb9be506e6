// Package etcd runs the embedded etcd that event-apiserver uses when no
// --etcd-servers are given.
package etcd

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// EmbeddedConfig is what an embedded etcd needs from the server's options.
type EmbeddedConfig struct {
	// DataDir holds etcd's WAL and snapshots; it survives restarts.
	DataDir string
	// ClientAddress is the host:port to serve clients on. Port 0 picks a
	// free port, which Embedded.ClientURL then reports.
	ClientAddress string
	// ProgressNotifyInterval is how often etcd tells idle watchers its
	// current revision (KEP-1904). The watch cache turns these into
	// bookmarks, so short intervals keep resumable resource versions fresh;
	// kubeadm uses 5s.
	ProgressNotifyInterval time.Duration
	// ReadyTimeout bounds how long Start waits for etcd to serve.
	ReadyTimeout time.Duration
	// QuotaBackendBytes is etcd's space quota; zero means
	// DefaultQuotaBackendBytes. Past it etcd refuses writes (NOSPACE)
	// until reclaimSpace has freed space.
	QuotaBackendBytes int64
	// ReclaimInterval is how often the NOSPACE alarm is checked; zero
	// means defaultReclaimInterval.
	ReclaimInterval time.Duration
}

// Embedded is a running embedded etcd.
type Embedded struct {
	etcd *embed.Etcd
	// closing silences what etcd reports of its own listeners closing.
	closing *atomic.Bool
	// failed receives etcd's fatal error, at most one.
	failed chan error
	// stopReclaim ends reclaimSpace.
	stopReclaim context.CancelFunc
}

// peerURL is advertised but never listened on: a single member needs a peer
// URL to name itself in the cluster, and keeping it constant lets the data
// directory be reused across restarts whatever client port is picked.
const peerURL = "http://localhost:2380"

// StartEmbedded starts etcd and waits until it serves clients.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	address, err := resolvePort(cfg.ClientAddress)
	if err != nil {
		return nil, err
	}
	clientURL, err := url.Parse("http://" + address)
	if err != nil {
		return nil, fmt.Errorf("invalid embedded etcd client address %q: %w", address, err)
	}
	peer, _ := url.Parse(peerURL)

	ec := embed.NewConfig()
	ec.Name = "event-apiserver"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = nil
	ec.AdvertisePeerUrls = []url.URL{*peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.WatchProgressNotifyInterval = cfg.ProgressNotifyInterval
	ec.LogLevel = "error"
	closing := &atomic.Bool{}
	logger, err := newLogger(closing)
	if err != nil {
		return nil, err
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	// The API server compacts etcd itself (storagebackend.DefaultCompactInterval),
	// as kube-apiserver does, so etcd's own auto-compaction stays off.
	ec.AutoCompactionRetention = "0"
	if cfg.QuotaBackendBytes <= 0 {
		cfg.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	if cfg.ReclaimInterval <= 0 {
		cfg.ReclaimInterval = defaultReclaimInterval
	}

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", cfg.DataDir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(cfg.ReadyTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s not ready after %s", cfg.DataDir, cfg.ReadyTimeout)
	}
	klog.InfoS("Started embedded etcd", "dataDir", cfg.DataDir, "clientURL", "http://"+e.Clients[0].Addr().String(),
		"progressNotifyInterval", cfg.ProgressNotifyInterval, "quotaBackendBytes", cfg.QuotaBackendBytes)
	ctx, stop := context.WithCancel(context.Background())
	embedded := &Embedded{etcd: e, closing: closing, failed: make(chan error, 1), stopReclaim: stop}
	go embedded.watch()
	go embedded.reclaimSpace(ctx, cfg.QuotaBackendBytes, cfg.ReclaimInterval)
	return embedded, nil
}

// watch reports the first of etcd's own failures: a listener that stopped
// serving (Err), or the server stopping while nobody asked it to (raft or
// storage errors stop it without a word on Err). What Close causes is not
// a failure.
func (e *Embedded) watch() {
	var err error
	select {
	case err = <-e.etcd.Err():
	case <-e.etcd.Server.StopNotify():
		err = fmt.Errorf("etcd server stopped")
	}
	if err != nil && !e.closing.Load() {
		e.failed <- err
	}
}

// newLogger is etcd's own default logger (JSON on stderr, errors only),
// except that once closing is set it drops the error etcd logs for each of
// its listeners as Close stops them ("setting up serving from embedded etcd
// failed": "mux: server closed", "http: Server closed", "use of closed
// network connection"), which would otherwise end every clean shutdown.
func newLogger(closing *atomic.Bool) (*zap.Logger, error) {
	config := logutil.DefaultZapLoggerConfig
	config.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	return config.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return quietOnClose{Core: c, closing: closing}
	}))
}

// listenerStopped is the message etcd's embed.errHandler logs when a
// listener's serve loop returns, on Close as on a real failure.
const listenerStopped = "setting up serving from embedded etcd failed."

type quietOnClose struct {
	zapcore.Core
	closing *atomic.Bool
}

func (q quietOnClose) With(fields []zapcore.Field) zapcore.Core {
	return quietOnClose{Core: q.Core.With(fields), closing: q.closing}
}

func (q quietOnClose) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if entry.Message == listenerStopped && q.closing.Load() {
		return checked
	}
	if q.Enabled(entry.Level) {
		return checked.AddCore(entry, q)
	}
	return checked
}

// resolvePort replaces port 0 with a free port. etcd must know its real
// port up front: its gRPC gateway dials the configured address, not the
// listener's.
func resolvePort(address string) (string, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", fmt.Errorf("invalid embedded etcd client address %q: %w", address, err)
	}
	if port != "0" {
		return address, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("finding a free port for embedded etcd: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ClientURL is the URL the API server's storage connects to.
func (e *Embedded) ClientURL() string {
	return "http://" + e.etcd.Clients[0].Addr().String()
}

// Err reports a fatal etcd error while it runs.
func (e *Embedded) Err() <-chan error {
	return e.failed
}

// Close stops etcd after it has flushed what it acknowledged.
func (e *Embedded) Close() {
	e.stopReclaim()
	e.closing.Store(true)
	e.etcd.Close()
	klog.InfoS("Stopped embedded etcd")
}
