package app

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	genericfeatures "k8s.io/apiserver/pkg/features"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	// Registers --logging-format=json.
	_ "k8s.io/component-base/logs/json/register"
	netutils "k8s.io/utils/net"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	embeddedetcd "github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/pkg/eventmetrics"
	"github.com/eventapiserver/event-apiserver/pkg/expiry"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/pkg/version"
)

const (
	defaultDataDir    = ".event-apiserver"
	defaultEtcdPrefix = "/registry"
	// kube-apiserver's storage media type, so both can read one events etcd.
	defaultStorageMediaType = "application/vnd.kubernetes.protobuf"
)

// Options owns every flag of event-apiserver and stays as the flags set it:
// Complete works out what the flags imply into completedOptions, a copy.
type Options struct {
	// DataDir holds the embedded etcd, serving certificates, the admin token
	// and the kubeconfig.
	DataDir string
	// EventTTL matches kube-apiserver's --event-ttl.
	EventTTL time.Duration
	// EventTTLRules override EventTTL by kind of Event (--event-ttl-rule).
	EventTTLRules []string
	// Expiry is the TTL backstop's flags.
	Expiry *expiry.Options

	SecureServing *genericoptions.SecureServingOptionsWithLoopback
	Etcd          *genericoptions.EtcdOptions
	EmbeddedEtcd  EmbeddedEtcdOptions
	ServerRun     *genericoptions.ServerRunOptions
	Features      *genericoptions.FeatureOptions
	Aggregated    *AggregatedOptions
	// Admission is the admission chain of the modes that serve Events
	// (admission.go).
	Admission *genericoptions.AdmissionOptions
	Storm     *storm.Options
	// EventMetrics counts Events on /metrics: the ones the Events API
	// stores, or history-only capture reads.
	EventMetrics *eventmetrics.Options
	Audit        *genericoptions.AuditOptions
	Logs         *logsapi.LoggingConfiguration
	// Version is --version: print the version and quit.
	Version version.Flag
	History *HistoryOptions
	// SelfSignedCertDNSNames are added to the generated serving
	// certificate, e.g. <service>.<namespace>.svc for an APIService.
	SelfSignedCertDNSNames []string
	// SelfSignedCertValidity is the generated leaf's lifetime; it is
	// renewed once a third of it is left.
	SelfSignedCertValidity time.Duration
}

// EmbeddedEtcdOptions apply when no --etcd-servers are given.
type EmbeddedEtcdOptions struct {
	// ClientAddress is the loopback host:port the embedded etcd serves on
	// (port 0 picks a free one); empty means a unix socket in the data dir.
	ClientAddress          string
	ProgressNotifyInterval time.Duration
	ReadyTimeout           time.Duration
	// QuotaBackendBytes is etcd's --quota-backend-bytes for the embedded etcd.
	QuotaBackendBytes int64
}

func NewOptions() *Options {
	etcd := genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig(defaultEtcdPrefix, nil))
	etcd.DefaultStorageMediaType = defaultStorageMediaType

	serving := genericoptions.NewSecureServingOptions()
	serving.BindAddress = netutils.ParseIPSloppy("127.0.0.1")
	serving.BindPort = 6443
	serving.ServerCert.PairName = "apiserver"
	// Derived from --data-dir in Complete unless --cert-dir is given.
	serving.ServerCert.CertDirectory = ""

	features := genericoptions.NewFeatureOptions()

	serverRun := genericoptions.NewServerRunOptions()
	// Without a grace period, open watches hold a shutdown until the HTTP
	// server's own timeout, about a minute (kube-apiserver behaves the
	// same). Ending them after a few seconds lets Ctrl-C and rolling
	// restarts finish promptly; clients resume their watches elsewhere.
	serverRun.ShutdownWatchTerminationGracePeriod = 5 * time.Second

	return &Options{
		DataDir:       defaultDataDir,
		EventTTL:      time.Hour,
		Expiry:        expiry.NewOptions(),
		SecureServing: serving.WithLoopback(),
		Etcd:          etcd,
		EmbeddedEtcd: EmbeddedEtcdOptions{
			ClientAddress:          "",
			ProgressNotifyInterval: embeddedetcd.DefaultProgressNotifyInterval,
			ReadyTimeout:           time.Minute,
			QuotaBackendBytes:      embeddedetcd.DefaultQuotaBackendBytes,
		},
		ServerRun:    serverRun,
		Features:     features,
		Aggregated:   NewAggregatedOptions(),
		Admission:    newAdmissionOptions(),
		Storm:        storm.NewOptions(),
		EventMetrics: eventmetrics.NewOptions(),
		Audit:        genericoptions.NewAuditOptions(),
		Logs:         logsapi.NewLoggingConfiguration(),

		SelfSignedCertValidity: 365 * 24 * time.Hour,
		History:                NewHistoryOptions(),
	}
}

func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets

	fs := fss.FlagSet("event-apiserver")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir,
		"Directory for the embedded etcd, serving certificates, the generated admin token and kubeconfig.")
	fs.DurationVar(&o.EventTTL, "event-ttl", o.EventTTL,
		"Amount of time to retain events. Zero keeps them forever.")
	// StringArray, not StringSlice: a rule holds commas.
	fs.StringArrayVar(&o.EventTTLRules, "event-ttl-rule", o.EventTTLRules,
		"A TTL for the Events a rule matches, in place of --event-ttl: KEY=VALUE[,KEY=VALUE...]:DURATION, "+
			"keys type (Normal or Warning), reason and reportingController (for old core/v1 recorders, "+
			"source.component), all given keys must match. Repeat the flag for more rules (at most 16); the "+
			"first that matches applies. Durations are whole seconds, at least 1s. "+
			"E.g. --event-ttl-rule=type=Warning:24h --event-ttl-rule=reason=Pulled,reportingController=kubelet:10m.")
	o.Expiry.AddFlags(fs)

	fs.StringSliceVar(&o.SelfSignedCertDNSNames, "self-signed-cert-dns-names", o.SelfSignedCertDNSNames,
		"Extra DNS names for the self-signed serving certificate generated when no --tls-cert-file is "+
			"given, e.g. event-apiserver.event-apiserver.svc for an APIService.")

	fs.DurationVar(&o.SelfSignedCertValidity, "self-signed-cert-validity", o.SelfSignedCertValidity,
		"Lifetime of the self-signed serving certificate generated when no --tls-cert-file is given. It is "+
			"signed by a CA kept in the certificate directory for 10 years, which the written kubeconfig trusts, "+
			"and renewed at start-up and while running once a third of its lifetime is left.")

	o.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	o.Etcd.AddFlags(fss.FlagSet("etcd"))
	o.EmbeddedEtcd.AddFlags(fss.FlagSet("embedded etcd"))
	o.ServerRun.AddUniversalFlags(fss.FlagSet("generic"))
	o.Features.AddFlags(fss.FlagSet("features"))
	o.Aggregated.AddFlags(fss.FlagSet("aggregated"))
	o.Storm.AddFlags(fss.FlagSet("event storms"))
	o.EventMetrics.AddFlags(fss.FlagSet("event metrics"))
	addAdmissionFlags(o.Admission, fss.FlagSet("admission"))
	o.Audit.AddFlags(fss.FlagSet("auditing"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	o.Version.AddFlag(fss.FlagSet("global"))
	o.History.AddFlags(fss.FlagSet("history"))
	return fss
}

func (o *EmbeddedEtcdOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClientAddress, "embedded-etcd-client-address", o.ClientAddress,
		"Loopback host:port the embedded etcd serves clients on (port 0: any free port), for tools such as "+
			"etcdctl. Empty (the default): a unix socket, --data-dir/etcd/etcd.sock, which only the data "+
			"directory's owner can reach. Used only without --etcd-servers.")
	fs.DurationVar(&o.ProgressNotifyInterval, "embedded-etcd-progress-notify-interval", o.ProgressNotifyInterval,
		"How often the embedded etcd sends watch progress notifications, which advance the watch cache and "+
			"clients' bookmarks while no Event changes. Used only without --etcd-servers.")
	fs.Int64Var(&o.QuotaBackendBytes, "embedded-etcd-quota-backend-bytes", o.QuotaBackendBytes,
		"Space quota of the embedded etcd's database (etcd's --quota-backend-bytes). Past it Event writes are "+
			"refused with 503 until expired Events are compacted away, which the server does by itself. "+
			"Used only without --etcd-servers.")
}

// completedOptions are the flags with what they imply worked out once: the
// mode, where etcd runs, absolute paths, the TTL rules, the history store's
// location. Complete copies what it fills in, so the Options stay as the
// flags set them, and nothing after Complete writes either.
type completedOptions struct {
	Options
	mode apiserver.Mode
	// embeddedEtcd: no --etcd-servers, so a server of the Events API runs
	// its own etcd under --data-dir.
	embeddedEtcd bool
	// set are the flags given; a flag left at its default contradicts
	// nothing (modes.go).
	set setFlags
	ttl *ttl.Rules
	// ttlErr is why the TTL rules do not parse, reported by Validate with
	// every other mistake.
	ttlErr error
}

// Complete decides the mode and fills what depends on other flags. fss are
// the command's flags, parsed: which were given decides what contradicts.
func (o *Options) Complete(fss cliflag.NamedFlagSets) (*completedOptions, error) {
	c := &completedOptions{
		Options:      *o,
		mode:         modeOf(o),
		embeddedEtcd: len(o.Etcd.StorageConfig.Transport.ServerList) == 0,
		set:          setFlagsOf(fss),
	}
	var err error
	if c.DataDir, err = filepath.Abs(o.DataDir); err != nil {
		return nil, err
	}
	history := *o.History
	if err := history.Complete(); err != nil {
		return nil, err
	}
	c.History = &history
	serving := *o.SecureServing.SecureServingOptions
	if serving.ServerCert.CertDirectory == "" {
		serving.ServerCert.CertDirectory = filepath.Join(c.DataDir, "certs")
	}
	c.SecureServing = serving.WithLoopback()
	c.ttl, c.ttlErr = ttl.Parse(o.EventTTLRules, o.EventTTL)
	return c, nil
}

// setFeatureDefaults gives the process's feature gates the mode's defaults
// where --feature-gates left them, before anything reads them. Standalone
// there is no priority and fairness (its configuration lives in the
// flowcontrol.apiserver.k8s.io API, which only kube-apiserver serves), and
// the etcd3 store's object size estimate prices LISTs for it alone while
// keeping the size of every key it has seen (6 MB at 100k Events), updated
// on every watch event: off, unless --feature-gates asks for it. A gate off
// already (an --emulated-version from before it) cannot be set at all.
func (c *completedOptions) setFeatureDefaults(gate featuregate.MutableVersionedFeatureGate) error {
	if c.mode != apiserver.Standalone {
		return nil
	}
	if gate.Enabled(genericfeatures.SizeBasedListCostEstimate) && !gate.ExplicitlySet(genericfeatures.SizeBasedListCostEstimate) {
		return gate.SetFromMap(map[string]bool{string(genericfeatures.SizeBasedListCostEstimate): false})
	}
	return nil
}

// Validate refuses contradictory flags (flagErrors, modes.go) and values out
// of range, all at once.
func (c *completedOptions) Validate() error {
	errs := c.flagErrors()
	if c.SelfSignedCertValidity < time.Minute {
		errs = append(errs, fmt.Errorf("--self-signed-cert-validity must be at least 1m"))
	}
	errs = append(errs, c.SecureServing.Validate()...)
	errs = append(errs, c.ServerRun.Validate()...)
	errs = append(errs, c.Features.Validate()...)
	errs = append(errs, c.Audit.Validate()...)
	errs = append(errs, c.History.Validate()...)
	errs = append(errs, c.EventMetrics.Validate()...)
	if c.mode.Delegates() {
		errs = append(errs, c.Aggregated.Validate()...)
	}
	if c.mode.ServesEvents() {
		errs = append(errs, c.validateEvents()...)
	}
	return utilerrors.NewAggregate(errs)
}

// validateEvents checks the flags of the Events API and its etcd.
func (c *completedOptions) validateEvents() []error {
	var errs []error
	if c.EventTTL < 0 {
		errs = append(errs, fmt.Errorf("--event-ttl must not be negative"))
	}
	if c.EventTTL > 0 && c.EventTTL < time.Second {
		errs = append(errs, fmt.Errorf("--event-ttl must be at least 1s: etcd leases count whole seconds"))
	}
	errs = append(errs, c.Expiry.Validate()...)
	if c.ttlErr != nil {
		errs = append(errs, c.ttlErr)
	}
	errs = append(errs, c.Storm.Validate()...)
	errs = append(errs, c.Admission.Validate()...)
	if !c.embeddedEtcd {
		return append(errs, c.Etcd.Validate()...)
	}
	// The embedded etcd serves without authentication: anyone who
	// reaches it can read and write every Event.
	if c.EmbeddedEtcd.ClientAddress == "" {
		// The unix socket in the 0700 data directory.
	} else if host, _, err := net.SplitHostPort(c.EmbeddedEtcd.ClientAddress); err != nil {
		errs = append(errs, fmt.Errorf("--embedded-etcd-client-address: %w", err))
	} else if ip := netutils.ParseIPSloppy(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		errs = append(errs, fmt.Errorf("--embedded-etcd-client-address must be a loopback address (the embedded etcd has no authentication), got %q", host))
	}
	if c.EmbeddedEtcd.QuotaBackendBytes <= 0 {
		errs = append(errs, fmt.Errorf("--embedded-etcd-quota-backend-bytes must be positive"))
	}
	if c.EmbeddedEtcd.ProgressNotifyInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--embedded-etcd-progress-notify-interval must be at least 100ms, etcd's minimum"))
	}
	// EtcdOptions insists on servers; the embedded one is only known once started.
	etcd := *c.Etcd
	etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:2379"}
	return append(errs, etcd.Validate()...)
}

// sharedCert reports whether the serving certificate comes from
// --serving-cert-secret, which only the modes behind kube-apiserver read.
func (c *completedOptions) sharedCert() bool {
	return c.mode.Delegates() && c.Aggregated.ServingCert.Enabled()
}

// selfSignedCert reports whether the server makes its own serving
// certificate: neither --tls-cert-file nor --serving-cert-secret.
func (c *completedOptions) selfSignedCert() bool {
	certKey := c.SecureServing.ServerCert.CertKey
	return !c.sharedCert() && certKey.CertFile == "" && certKey.KeyFile == ""
}

// writesDataDir reports whether the server writes under --data-dir: the
// embedded etcd, the standalone admin token and kubeconfig, a generated
// serving certificate, the embedded history store. Behind kube-apiserver,
// with a certificate from --tls-cert-file or the shared Secret and history
// off or in PostgreSQL, it writes nothing, so it runs on a read-only root
// filesystem with no volume at all.
func (c *completedOptions) writesDataDir() bool {
	return c.mode == apiserver.Standalone || c.History.writesDataDir() || c.selfSignedCert()
}

// servingHost is how local clients reach the secure port.
func (c *completedOptions) servingHost() string {
	ip := c.SecureServing.BindAddress
	if ip == nil || ip.IsUnspecified() {
		ip = netutils.ParseIPSloppy("127.0.0.1")
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(c.SecureServing.BindPort))
}
