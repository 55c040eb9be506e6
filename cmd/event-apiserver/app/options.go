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
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	// Registers --logging-format=json.
	_ "k8s.io/component-base/logs/json/register"
	netutils "k8s.io/utils/net"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
	embeddedetcd "github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/pkg/expiry"
	"github.com/eventapiserver/event-apiserver/pkg/standalone"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/pkg/version"
)

const (
	defaultDataDir    = ".event-apiserver"
	defaultEtcdPrefix = "/registry"
	// kube-apiserver's storage media type, so both can read one events etcd.
	defaultStorageMediaType = "application/vnd.kubernetes.protobuf"
)

// Options owns every flag of event-apiserver.
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
	Storm         *storm.Options
	Audit         *genericoptions.AuditOptions
	Logs          *logsapi.LoggingConfiguration
	// Version is --version: print the version and quit.
	Version version.Flag
	History *HistoryOptions
	// SelfSignedCertDNSNames are added to the generated serving
	// certificate, e.g. <service>.<namespace>.svc for an APIService.
	SelfSignedCertDNSNames []string
	// SelfSignedCertValidity is the generated leaf's lifetime; it is
	// renewed once a third of it is left.
	SelfSignedCertValidity time.Duration

	// selfSigned is the generated serving certificate, when no
	// --tls-cert-file is given; set by Config.
	selfSigned *standalone.ServingCert
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
		ServerRun:  serverRun,
		Features:   features,
		Aggregated: NewAggregatedOptions(),
		Storm:      storm.NewOptions(),
		Audit:      genericoptions.NewAuditOptions(),
		Logs:       logsapi.NewLoggingConfiguration(),

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

// Embedded reports whether the server runs its own etcd.
func (o *Options) Embedded() bool {
	return len(o.Etcd.StorageConfig.Transport.ServerList) == 0
}

// Complete fills what depends on other flags.
func (o *Options) Complete() error {
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	o.DataDir = dataDir
	if err := o.History.Complete(); err != nil {
		return err
	}
	if o.History.Only {
		o.completeHistoryOnly()
	} else if o.Aggregated.Enabled {
		o.Aggregated.Complete()
	} else {
		// Priority and fairness reads its configuration from the
		// flowcontrol.apiserver.k8s.io API, which only kube-apiserver
		// serves; alone, the max-in-flight limits apply instead.
		o.Features.EnablePriorityAndFairness = false
		// The etcd3 store's object size estimate prices LISTs for priority
		// and fairness only, and keeps the size of every key it has seen
		// (6 MB at 100k Events), updated on every watch event. Without
		// priority and fairness it would feed one metric, so it is off
		// unless --feature-gates asks for it. A gate off already (an
		// --emulated-version from before it) cannot be set at all.
		if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.SizeBasedListCostEstimate) &&
			!utilfeature.DefaultMutableFeatureGate.ExplicitlySet(genericfeatures.SizeBasedListCostEstimate) {
			if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(genericfeatures.SizeBasedListCostEstimate): false}); err != nil {
				return err
			}
		}
	}
	if o.SecureServing.ServerCert.CertDirectory == "" {
		o.SecureServing.ServerCert.CertDirectory = filepath.Join(o.DataDir, "certs")
	}
	return nil
}

func (o *Options) Validate() error {
	var errs []error
	if o.EventTTL < 0 {
		errs = append(errs, fmt.Errorf("--event-ttl must not be negative"))
	}
	if o.EventTTL > 0 && o.EventTTL < time.Second {
		errs = append(errs, fmt.Errorf("--event-ttl must be at least 1s: etcd leases count whole seconds"))
	}
	if _, err := ttl.Parse(o.EventTTLRules, o.EventTTL); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.Expiry.Validate()...)
	if o.SelfSignedCertValidity < time.Minute {
		errs = append(errs, fmt.Errorf("--self-signed-cert-validity must be at least 1m"))
	}
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.ServerRun.Validate()...)
	errs = append(errs, o.Features.Validate()...)
	errs = append(errs, o.Aggregated.Validate()...)
	if o.Aggregated.Enabled && o.Aggregated.ServingCert.Enabled() && (o.SecureServing.ServerCert.CertKey.CertFile != "" || o.SecureServing.ServerCert.CertKey.KeyFile != "") {
		errs = append(errs, fmt.Errorf("--serving-cert-secret and --tls-cert-file/--tls-private-key-file are two sources of the serving certificate: give one"))
	}
	errs = append(errs, o.Storm.Validate()...)
	errs = append(errs, o.Audit.Validate()...)
	errs = append(errs, o.History.Validate()...)
	if o.History.Only {
		errs = append(errs, o.validateHistoryOnly()...)
	} else if o.Embedded() {
		if o.Aggregated.Enabled {
			// Replicas behind an APIService would each keep their own
			// Events, and a pod restart would lose them all.
			errs = append(errs, fmt.Errorf("--aggregated needs --etcd-servers: the embedded etcd is for a single standalone server"))
		}
		// The embedded etcd serves without authentication: anyone who
		// reaches it can read and write every Event.
		if o.EmbeddedEtcd.ClientAddress == "" {
			// The unix socket in the 0700 data directory.
		} else if host, _, err := net.SplitHostPort(o.EmbeddedEtcd.ClientAddress); err != nil {
			errs = append(errs, fmt.Errorf("--embedded-etcd-client-address: %w", err))
		} else if ip := netutils.ParseIPSloppy(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			errs = append(errs, fmt.Errorf("--embedded-etcd-client-address must be a loopback address (the embedded etcd has no authentication), got %q", host))
		}
		if o.EmbeddedEtcd.QuotaBackendBytes <= 0 {
			errs = append(errs, fmt.Errorf("--embedded-etcd-quota-backend-bytes must be positive"))
		}
		if o.EmbeddedEtcd.ProgressNotifyInterval < 100*time.Millisecond {
			errs = append(errs, fmt.Errorf("--embedded-etcd-progress-notify-interval must be at least 100ms, etcd's minimum"))
		}
		// EtcdOptions insists on servers; the embedded one is only known once started.
		etcd := *o.Etcd
		etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:2379"}
		errs = append(errs, etcd.Validate()...)
	} else {
		errs = append(errs, o.Etcd.Validate()...)
	}
	return utilerrors.NewAggregate(errs)
}

// writesDataDir reports whether the server writes under --data-dir: the
// embedded etcd, the standalone admin token and kubeconfig, a generated
// serving certificate, the embedded history store. Aggregated, with
// --etcd-servers, a certificate from --tls-cert-file or the shared Secret
// and history off or in PostgreSQL, it writes nothing, so it runs on a
// read-only root filesystem with no volume at all.
func (o *Options) writesDataDir() bool {
	if (o.Embedded() && !o.History.Only) || !o.Aggregated.Enabled || o.History.writesDataDir() {
		return true
	}
	return o.SecureServing.ServerCert.CertKey.CertFile == "" && !o.Aggregated.ServingCert.Enabled()
}

// servingHost is how local clients reach the secure port.
func (o *Options) servingHost() string {
	ip := o.SecureServing.BindAddress
	if ip == nil || ip.IsUnspecified() {
		ip = netutils.ParseIPSloppy("127.0.0.1")
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(o.SecureServing.BindPort))
}
