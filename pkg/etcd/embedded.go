// Package etcd runs the embedded etcd that event-apiserver uses when no
// --etcd-servers are given.
package etcd

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/pkg/v3/featuregate"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/features"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// DefaultProgressNotifyInterval is the --watch-progress-notify-interval
// kubeadm gives etcd. The embedded etcd defaults to it, the server's start-up
// check recommends it for an external etcd, and the load tool's etcd runs
// with it, so all three agree on the pace at which bookmarks advance.
const DefaultProgressNotifyInterval = 5 * time.Second

// EmbeddedConfig is what an embedded etcd needs from the server's options.
type EmbeddedConfig struct {
	// DataDir holds etcd's WAL and snapshots; it survives restarts.
	DataDir string
	// ClientAddress is the loopback host:port to serve clients on; port 0
	// lets etcd's own listener pick a free port, which Embedded.ClientURL
	// then reports. Empty serves on a unix socket in DataDir instead, which
	// only the data directory's owner can reach: etcd has no
	// authentication here.
	ClientAddress string
	// ProgressNotifyInterval is how often etcd tells idle watchers its
	// current revision (KEP-1904). The watch cache turns these into
	// bookmarks, so short intervals keep resumable resource versions fresh;
	// the server's default is DefaultProgressNotifyInterval.
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
	clientURL, err := clientURL(cfg)
	if err != nil {
		return nil, err
	}
	peer, _ := url.Parse(peerURL)

	ec := embed.NewConfig()
	ec.Name = "event-apiserver"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	if clientURL.Scheme == "unix" {
		// etcd insists on host:port for advertised URLs, which a socket
		// path is not. Like peerURL, it is only a name: the API server's
		// clients never sync endpoints from the member list.
		ec.AdvertiseClientUrls = []url.URL{{Scheme: "unix", Host: "localhost:0"}}
	}
	ec.ListenPeerUrls = nil
	ec.AdvertisePeerUrls = []url.URL{*peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.WatchProgressNotifyInterval = cfg.ProgressNotifyInterval
	ec.LogLevel = "error"
	closing := &atomic.Bool{}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newLogger(closing))
	// The API server compacts etcd itself (storagebackend.DefaultCompactInterval),
	// as kube-apiserver does, so etcd's own auto-compaction stays off.
	ec.AutoCompactionRetention = "0"
	if cfg.QuotaBackendBytes <= 0 {
		cfg.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	if err := enableLeaseCheckpoints(ec); err != nil {
		return nil, err
	}
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
	embedded := &Embedded{etcd: e, closing: closing, failed: make(chan error, 1)}
	klog.InfoS("Started embedded etcd", "dataDir", cfg.DataDir, "clientURL", embedded.ClientURL(),
		"progressNotifyInterval", cfg.ProgressNotifyInterval, "quotaBackendBytes", cfg.QuotaBackendBytes)
	ctx, stop := context.WithCancel(context.Background())
	embedded.stopReclaim = stop
	go embedded.watch()
	go embedded.reclaimSpace(ctx, cfg.QuotaBackendBytes, cfg.ReclaimInterval)
	return embedded, nil
}

// LeaseCheckpointFeatureGates is the --feature-gates value that turns lease
// checkpoints on in etcd v3.6 (v3.5 spells it
// --experimental-enable-lease-checkpoint
// --experimental-enable-lease-checkpoint-persist, which v3.6 still accepts
// as deprecated aliases). Every etcd this project runs sets it: the
// embedded one, the test bed's and the benchmark's.
const LeaseCheckpointFeatureGates = "LeaseCheckpoint=true,LeaseCheckpointPersist=true"

// enableLeaseCheckpoints makes etcd keep an Event's TTL running across
// restarts. Without checkpoints only the leader's memory holds a lease's
// remaining time: every leader change, and every restart of this one-member
// etcd, renews every lease to its full TTL (etcd #9395, #13294; kubernetes
// #65497), so a server restarted more often than its TTL keeps its Events
// for ever. With LeaseCheckpoint the leader records each lease's remaining
// TTL through raft, and with LeaseCheckpointPersist that record is written
// to the backend, which is what a restart of a single member reads back
// (without it a restart still renews in full).
//
// The limits, which pkg/expiry's backstop exists for: v3.6.8 checkpoints
// every 5 minutes (lease/lessor.go defaultLeaseCheckpointInterval; neither
// embed.Config nor etcd's flags can change it), and only leases with more
// than that left, so a restart renews a lease by up to 5 minutes, and a
// TTL of 5 minutes or less is renewed in full as before.
func enableLeaseCheckpoints(ec *embed.Config) error {
	gate, ok := ec.ServerFeatureGate.(featuregate.MutableFeatureGate)
	if !ok {
		return fmt.Errorf("embedded etcd: feature gates are not settable (%T)", ec.ServerFeatureGate)
	}
	return gate.SetFromMap(map[string]bool{
		string(features.LeaseCheckpoint):        true,
		string(features.LeaseCheckpointPersist): true,
	})
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

// newLogger logs etcd's errors, and nothing below, through klog, so that
// they reach the server's log in its --logging-format like every other
// line (etcd's own logger writes JSON of another shape on stderr), except
// that once closing is set it drops the error etcd logs for each of its
// listeners as Close stops them ("setting up serving from embedded etcd
// failed": "mux: server closed", "http: Server closed", "use of closed
// network connection"), which would otherwise end every clean shutdown.
func newLogger(closing *atomic.Bool) *zap.Logger {
	return zap.New(quietOnClose{Core: klogErrors{}, closing: closing}, zap.AddCaller())
}

// klogErrors writes zap's error entries (and worse) as klog errors, their
// fields as its key/value pairs; it drops the rest.
type klogErrors struct {
	fields []zapcore.Field
}

func (klogErrors) Enabled(level zapcore.Level) bool { return level >= zapcore.ErrorLevel }

func (c klogErrors) With(fields []zapcore.Field) zapcore.Core {
	return klogErrors{fields: append(slices.Clip(c.fields), fields...)}
}

func (c klogErrors) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(entry.Level) {
		return checked.AddCore(entry, c)
	}
	return checked
}

func (c klogErrors) Write(entry zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clip(c.fields), fields...) {
		f.AddTo(enc)
	}
	keysAndValues := []any{"component", "etcd"}
	if entry.Caller.Defined {
		keysAndValues = append(keysAndValues, "etcdCaller", entry.Caller.TrimmedPath())
	}
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		keysAndValues = append(keysAndValues, k, enc.Fields[k])
	}
	klog.ErrorS(nil, entry.Message, keysAndValues...)
	return nil
}

func (klogErrors) Sync() error {
	klog.Flush()
	return nil
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

// socketName is the embedded etcd's unix socket inside its data directory.
const socketName = "etcd.sock"

// maxSocketPath is the longest path a unix socket address holds on Linux
// (sun_path, 108 bytes with its terminating NUL).
const maxSocketPath = 107

// clientURL is where etcd serves clients. A socket path too long for
// sun_path is refused rather than silently moved to TCP.
func clientURL(cfg EmbeddedConfig) (*url.URL, error) {
	if cfg.ClientAddress == "" {
		dir, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		socket := filepath.Join(dir, socketName)
		if len(socket) > maxSocketPath {
			return nil, fmt.Errorf("embedded etcd socket path %s is longer than %d bytes: use a shorter --data-dir or --embedded-etcd-client-address=127.0.0.1:0", socket, maxSocketPath)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating embedded etcd data dir: %w", err)
		}
		// A socket left by a process that died cannot be listened on again.
		if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("removing stale embedded etcd socket: %w", err)
		}
		return &url.URL{Scheme: "unix", Path: socket}, nil
	}
	if _, _, err := net.SplitHostPort(cfg.ClientAddress); err != nil {
		return nil, fmt.Errorf("invalid embedded etcd client address %q: %w", cfg.ClientAddress, err)
	}
	// Port 0 goes to etcd as it is: its listener binds a free port itself,
	// with no window between choosing the port and binding it.
	return &url.URL{Scheme: "http", Host: cfg.ClientAddress}, nil
}

// ClientURL is the URL the API server's storage connects to.
func (e *Embedded) ClientURL() string {
	addr := e.etcd.Clients[0].Addr()
	if addr.Network() == "unix" {
		return "unix://" + addr.String()
	}
	return "http://" + addr.String()
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
