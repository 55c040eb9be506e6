package app

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/eventmetrics"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
	"github.com/eventapiserver/event-apiserver/pkg/history/fleet"
	"github.com/eventapiserver/event-apiserver/pkg/history/postgres"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
	historyregistry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

const (
	historyStoreSQLite   = "sqlite"
	historyStorePostgres = "postgres"
	// historyOpenTimeout bounds preparing a shared store at start; an
	// unreachable one delays history, not the server.
	historyOpenTimeout = 10 * time.Second
)

// HistoryOptions configure Event history beyond the TTL.
type HistoryOptions struct {
	Enabled bool
	// Only serves history alone, captured from kube-apiserver's Events API
	// (history_only.go).
	Only  bool
	Store string
	// DSN locates the store; for sqlite a file path, by default
	// <data-dir>/history/history.db.
	DSN string
	// DSNFile holds DSN, so a password in it stays out of the process's
	// arguments (ps, /proc/PID/cmdline), as kube components take secrets
	// from files; Complete reads it.
	DSNFile           string
	Retention         time.Duration
	MaxBytes          int64
	RetentionInterval time.Duration
	BatchSize         int
	BatchInterval     time.Duration
	MaxQueueBytes     int64
	BehindTimeout     time.Duration
	// MaxQueryWindow, MaxQueryRows and QueryTimeout bound each
	// eventrecords query (historyregistry.Limits).
	MaxQueryWindow time.Duration
	MaxQueryRows   int
	QueryTimeout   time.Duration
	// ClusterName is the server's own cluster, as eventrecords show it.
	ClusterName string
	// FleetNamespace turns on capture from a fleet's member clusters, whose
	// kubeconfig Secrets it holds (package fleet).
	FleetNamespace        string
	FleetMaxMembers       int
	FleetMemberQueueBytes int64
}

func NewHistoryOptions() *HistoryOptions {
	return &HistoryOptions{
		Enabled:           true,
		Store:             historyStoreSQLite,
		Retention:         14 * 24 * time.Hour,
		RetentionInterval: time.Minute,
		BatchSize:         500,
		BatchInterval:     time.Second,
		MaxQueueBytes:     64 << 20,
		BehindTimeout:     90 * time.Second,
		MaxQueryWindow:    historyregistry.DefaultMaxQueryWindow,
		MaxQueryRows:      historyregistry.DefaultMaxQueryRows,
		QueryTimeout:      historyregistry.DefaultQueryTimeout,
		// kube-controller-manager's --cluster-name default.
		ClusterName:           "kubernetes",
		FleetMaxMembers:       100,
		FleetMemberQueueBytes: 8 << 20,
	}
}

func (o *HistoryOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "history", o.Enabled,
		"Keep every Event version beyond --event-ttl and serve it read-only as "+
			"history.eventapiserver.io/v1alpha1 eventrecords.")
	fs.BoolVar(&o.Only, "history-only", o.Only,
		"Serve only history.eventapiserver.io, behind its own APIService, capturing Events from kube-apiserver's "+
			"Events API (one list and watch of all namespaces): no Events API, no etcd, no kube-apiserver flag to "+
			"change. Authentication and authorization are delegated to kube-apiserver as with --aggregated "+
			"(--kubeconfig, or the in-cluster configuration). For clusters whose control plane you do not run.")
	fs.StringVar(&o.Store, "history-store", o.Store,
		"Where history is kept: sqlite (one file under --data-dir, nothing to install; each replica keeps "+
			"its own) or postgres (one PostgreSQL 15+ database that every replica shares; --history-dsn).")
	fs.StringVar(&o.DSN, "history-dsn", o.DSN,
		"The history store's location: for sqlite a file path (default <data-dir>/history/history.db); "+
			"for postgres a connection URL or key=value string (postgres://user@host/db?sslmode=verify-full). "+
			"Deprecated for a DSN holding a password, which every process on the node can read in the arguments: "+
			"use --history-dsn-file.")
	fs.StringVar(&o.DSNFile, "history-dsn-file", o.DSNFile,
		"A file holding --history-dsn (e.g. a Secret's key mounted as a file), read once at start; a trailing "+
			"newline is ignored. Keeps a password out of the process's arguments. Exclusive with --history-dsn.")
	fs.DurationVar(&o.Retention, "history-retention", o.Retention,
		"How long Event versions are kept in history after capture saw them. Zero: no age limit.")
	fs.Int64Var(&o.MaxBytes, "history-max-bytes", o.MaxBytes,
		"Size the history store is kept under by deleting its oldest versions. Zero: no size limit.")
	fs.DurationVar(&o.RetentionInterval, "history-retention-interval", o.RetentionInterval,
		"How often the retention limits are enforced.")
	fs.IntVar(&o.BatchSize, "history-batch-size", o.BatchSize,
		"Most Event changes written to history in one transaction.")
	fs.DurationVar(&o.BatchInterval, "history-batch-interval", o.BatchInterval,
		"Longest an Event change waits for its batch to fill before it is written to history.")
	fs.Int64Var(&o.MaxQueueBytes, "history-max-queue-bytes", o.MaxQueueBytes,
		"Bytes of Event changes read from etcd (or kube-apiserver) and not yet written to history; when full, "+
			"capture stops reading until the store catches up.")
	fs.DurationVar(&o.BehindTimeout, "history-capture-behind-timeout", o.BehindTimeout,
		"With --history-only: how long kube-apiserver's resourceVersion may stay below the one history captured "+
			"up to (its etcd restored from a backup) before capture lists all Events again and resumes from "+
			"kube-apiserver's (event_apiserver_history_capture_relists_total{reason=\"restored\"}).")
	fs.DurationVar(&o.MaxQueryWindow, "history-max-query-window", o.MaxQueryWindow,
		"Longest window (since to until) an eventrecords text search (note.contains=: a list, or a watch's initial "+
			"records) or an eventrecordcounts count may span; a longer (or, for a search, open) one is refused with 400 "+
			"(422 for a count).")
	fs.IntVar(&o.MaxQueryRows, "history-max-query-rows", o.MaxQueryRows,
		"Most Event versions an eventrecords text search (a list, or a watch's initial records) may select in its "+
			"window, counted before any is read; more are refused with 400.")
	fs.DurationVar(&o.QueryTimeout, "history-query-timeout", o.QueryTimeout,
		"Longest a history store query of an eventrecords list or watch or an eventrecordcounts count may run; the "+
			"database statement is then cancelled and the client gets 504 Timeout (a watch: as its ERROR event).")
	fs.StringVar(&o.ClusterName, "history-cluster-name", o.ClusterName,
		"The name of the cluster this server captures, a DNS label: the cluster field of its eventrecords, "+
			"which the field selector cluster= selects on. Versions are stored under the server's own cluster, "+
			"not this name, so renaming it renames all of its history, including versions stored before the cluster "+
			"field existed. Member clusters of a fleet carry their own names.")
	fs.StringVar(&o.FleetNamespace, "history-fleet-namespace", o.FleetNamespace,
		"With --history-only: also capture the Events of a fleet's member clusters, one per Secret of this namespace "+
			"(of the server's own cluster) labelled "+fleet.MemberLabel+"=<cluster name>, whose "+fleet.KubeconfigKey+
			" key holds a kubeconfig allowed to list and watch Events. Members are added and removed by creating and "+
			"deleting Secrets, without a restart; none is part of the server's readiness. A reader sees a cluster's "+
			"eventrecords only with verb get on history.eventapiserver.io clusters of that name (docs/fleet.md).")
	fs.IntVar(&o.FleetMaxMembers, "history-fleet-max-members", o.FleetMaxMembers,
		"With --history-fleet-namespace: most member clusters captured at once; Secrets past it (by cluster name) are left out.")
	fs.Int64Var(&o.FleetMemberQueueBytes, "history-fleet-member-queue-bytes", o.FleetMemberQueueBytes,
		"With --history-fleet-namespace: bytes of Event changes read from one member cluster and not yet written to "+
			"history (--history-max-queue-bytes for each member).")
}

// Complete reads --history-dsn-file. A file that cannot be read or holds
// nothing stops the start: an empty DSN would fall back to the default
// SQLite file and keep history where nobody looks for it.
func (o *HistoryOptions) Complete() error {
	if o.DSNFile == "" {
		return nil
	}
	if o.DSN != "" {
		return fmt.Errorf("--history-dsn and --history-dsn-file are two sources of the history store's location: give one")
	}
	data, err := os.ReadFile(o.DSNFile)
	if err != nil {
		return fmt.Errorf("--history-dsn-file: %w", err)
	}
	dsn := strings.TrimRight(string(data), "\r\n")
	if strings.TrimSpace(dsn) == "" {
		return fmt.Errorf("--history-dsn-file %s is empty", o.DSNFile)
	}
	o.DSN = dsn
	return nil
}

func (o *HistoryOptions) Validate() []error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	switch o.Store {
	case historyStoreSQLite:
	case historyStorePostgres:
		if o.DSN == "" {
			errs = append(errs, fmt.Errorf("--history-store=postgres needs --history-dsn-file (or --history-dsn)"))
		}
	default:
		errs = append(errs, fmt.Errorf("--history-store must be %s or %s", historyStoreSQLite, historyStorePostgres))
	}
	if o.Retention < 0 || o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("--history-retention and --history-max-bytes must not be negative"))
	}
	if o.RetentionInterval <= 0 || o.BatchInterval <= 0 {
		errs = append(errs, fmt.Errorf("--history-retention-interval and --history-batch-interval must be positive"))
	}
	if o.BehindTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--history-capture-behind-timeout must be positive"))
	}
	if o.MaxQueryWindow <= 0 || o.MaxQueryRows <= 0 || o.QueryTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--history-max-query-window, --history-max-query-rows and --history-query-timeout must be positive"))
	}
	if o.BatchSize <= 0 || o.MaxQueueBytes <= 0 {
		errs = append(errs, fmt.Errorf("--history-batch-size and --history-max-queue-bytes must be positive"))
	}
	if o.FleetMaxMembers <= 0 || o.FleetMemberQueueBytes <= 0 {
		errs = append(errs, fmt.Errorf("--history-fleet-max-members and --history-fleet-member-queue-bytes must be positive"))
	}
	if msgs := validation.ValidateNamespaceName(o.FleetNamespace, false); o.FleetNamespace != "" && len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--history-fleet-namespace %q: %s", o.FleetNamespace, strings.Join(msgs, "; ")))
	}
	// SQLite's versions table keys a version by namespace, name and
	// revision, not by cluster: two members' Events that agree on all three
	// would keep one of them.
	if o.FleetNamespace != "" && o.Store != historyStorePostgres {
		errs = append(errs, fmt.Errorf("--history-fleet-namespace needs --history-store=%s: the embedded store cannot tell apart two member clusters' Events of one namespace, name and resourceVersion", historyStorePostgres))
	}
	if msgs := fleet.ValidateName(o.ClusterName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--history-cluster-name %q: %s", o.ClusterName, strings.Join(msgs, "; ")))
	}
	return errs
}

// writesDataDir reports whether history lives in the embedded store's
// default file under --data-dir.
func (o *HistoryOptions) writesDataDir() bool {
	return o.Enabled && o.Store != historyStorePostgres && o.DSN == ""
}

// openStore opens the configured history store.
func (o *HistoryOptions) openStore(dataDir string) (history.Store, error) {
	if o.Store == historyStorePostgres {
		ctx, cancel := context.WithTimeout(context.Background(), historyOpenTimeout)
		defer cancel()
		return postgres.Open(ctx, o.DSN)
	}
	dsn := o.DSN
	if dsn == "" {
		dsn = filepath.Join(dataDir, "history", "history.db")
	}
	return sqlite.Open(dsn)
}

func (o *HistoryOptions) captureConfig() capture.Config {
	return capture.Config{
		BatchSize:     o.BatchSize,
		BatchInterval: o.BatchInterval,
		MaxQueueBytes: o.MaxQueueBytes,
	}
}

func (o *HistoryOptions) limits() historyregistry.Limits {
	return historyregistry.Limits{MaxWindow: o.MaxQueryWindow, MaxRows: o.MaxQueryRows, Timeout: o.QueryTimeout}
}

func (o *HistoryOptions) retention() history.Retention {
	return history.Retention{
		MaxAge:   o.Retention,
		MaxBytes: o.MaxBytes,
		Interval: o.RetentionInterval,
	}
}

// Config opens the store and capture's etcd client; nil when history is off.
func (o *HistoryOptions) Config(dataDir string, storage storagebackend.Config) (*apiserver.HistoryConfig, error) {
	if !o.Enabled {
		return nil, nil
	}
	store, err := o.openStore(dataDir)
	if err != nil {
		return nil, err
	}
	client, err := capture.NewClient(storage.Transport)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("connecting history capture to etcd: %w", err)
	}
	source := capture.NewEtcdSource(capture.EtcdConfig{
		Client: client,
		// The key prefix the Event storage writes under, as kube-apiserver lays it out.
		Prefix: path.Join("/", storage.Prefix, "events") + "/",
	})
	return &apiserver.HistoryConfig{
		Store:     store,
		Sources:   []capture.Source{source},
		Capture:   o.captureConfig(),
		Retention: o.retention(),
		Limits:    o.limits(),
		Count:     historyregistry.CountConfig{MaxWindow: o.MaxQueryWindow, Timeout: o.QueryTimeout},
		Cluster:   o.ClusterName,
	}, nil
}

// KubeConfig opens the store and capture's client of kube-apiserver, for
// the history-only server, whose capture counts the Events it reads in
// events. The client asks for protobuf, which costs kube-apiserver less to
// encode for its one watch than JSON.
func (o *HistoryOptions) KubeConfig(dataDir string, kubeConfig *rest.Config, events *eventmetrics.Counter) (*apiserver.HistoryConfig, error) {
	kubeConfig = rest.CopyConfig(kubeConfig)
	kubeConfig.ContentType = runtime.ContentTypeProtobuf
	kubeConfig.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver client for history capture: %w", err)
	}
	store, err := o.openStore(dataDir)
	if err != nil {
		return nil, err
	}
	source := capture.NewKubernetesSource(capture.KubernetesConfig{Client: client, BehindTimeout: o.BehindTimeout, EventMetrics: events})
	var members *fleet.Fleet
	if o.FleetNamespace != "" {
		members = fleet.New(fleet.Config{
			Client:        client,
			Namespace:     o.FleetNamespace,
			Own:           o.ClusterName,
			MaxMembers:    o.FleetMaxMembers,
			MaxQueueBytes: o.FleetMemberQueueBytes,
			BehindTimeout: o.BehindTimeout,
			// One watch, and a relist's pages now and then.
			QPS: 5, Burst: 10,
		})
	}
	return &apiserver.HistoryConfig{
		Store:     store,
		Sources:   []capture.Source{source},
		Capture:   o.captureConfig(),
		Retention: o.retention(),
		Limits:    o.limits(),
		Count:     historyregistry.CountConfig{MaxWindow: o.MaxQueryWindow, Timeout: o.QueryTimeout},
		Cluster:   o.ClusterName,
		Fleet:     members,
	}, nil
}
