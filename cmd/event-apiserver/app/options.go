package app

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	cliflag "k8s.io/component-base/cli/flag"
	netutils "k8s.io/utils/net"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
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

	SecureServing *genericoptions.SecureServingOptionsWithLoopback
	Etcd          *genericoptions.EtcdOptions
	EmbeddedEtcd  EmbeddedEtcdOptions
	ServerRun     *genericoptions.ServerRunOptions
	Features      *genericoptions.FeatureOptions
	Aggregated    *AggregatedOptions
	Storm         *storm.Options
	History       *HistoryOptions
	// SelfSignedCertDNSNames are added to the generated serving
	// certificate, e.g. <service>.<namespace>.svc for an APIService.
	SelfSignedCertDNSNames []string
}

// EmbeddedEtcdOptions apply when no --etcd-servers are given.
type EmbeddedEtcdOptions struct {
	// ClientAddress is where the embedded etcd serves; port 0 picks a free one.
	ClientAddress          string
	ProgressNotifyInterval time.Duration
	ReadyTimeout           time.Duration
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
		SecureServing: serving.WithLoopback(),
		Etcd:          etcd,
		EmbeddedEtcd: EmbeddedEtcdOptions{
			ClientAddress:          "127.0.0.1:0",
			ProgressNotifyInterval: 5 * time.Second,
			ReadyTimeout:           time.Minute,
		},
		ServerRun:  serverRun,
		Features:   features,
		Aggregated: NewAggregatedOptions(),
		Storm:      storm.NewOptions(),
		History:    NewHistoryOptions(),
	}
}

func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets

	fs := fss.FlagSet("event-apiserver")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir,
		"Directory for the embedded etcd, serving certificates, the generated admin token and kubeconfig.")
	fs.DurationVar(&o.EventTTL, "event-ttl", o.EventTTL,
		"Amount of time to retain events. Zero keeps them forever.")

	fs.StringSliceVar(&o.SelfSignedCertDNSNames, "self-signed-cert-dns-names", o.SelfSignedCertDNSNames,
		"Extra DNS names for the self-signed serving certificate generated when no --tls-cert-file is "+
			"given, e.g. event-apiserver.event-apiserver.svc for an APIService.")

	o.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	o.Etcd.AddFlags(fss.FlagSet("etcd"))
	o.EmbeddedEtcd.AddFlags(fss.FlagSet("embedded etcd"))
	o.ServerRun.AddUniversalFlags(fss.FlagSet("generic"))
	o.Features.AddFlags(fss.FlagSet("features"))
	o.Aggregated.AddFlags(fss.FlagSet("aggregated"))
	o.Storm.AddFlags(fss.FlagSet("event storms"))
	o.History.AddFlags(fss.FlagSet("history"))
	return fss
}

func (o *EmbeddedEtcdOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClientAddress, "embedded-etcd-client-address", o.ClientAddress,
		"host:port the embedded etcd serves clients on (port 0: any free port). Keep it on loopback. "+
			"Used only without --etcd-servers.")
	fs.DurationVar(&o.ProgressNotifyInterval, "embedded-etcd-progress-notify-interval", o.ProgressNotifyInterval,
		"How often the embedded etcd sends watch progress notifications, which advance the watch cache and "+
			"clients' bookmarks while no Event changes. Used only without --etcd-servers.")
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
	if o.Aggregated.Enabled {
		o.Aggregated.Complete()
	} else {
		// Priority and fairness reads its configuration from the
		// flowcontrol.apiserver.k8s.io API, which only kube-apiserver
		// serves; alone, the max-in-flight limits apply instead.
		o.Features.EnablePriorityAndFairness = false
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
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.ServerRun.Validate()...)
	errs = append(errs, o.Features.Validate()...)
	errs = append(errs, o.Aggregated.Validate()...)
	errs = append(errs, o.Storm.Validate()...)
	errs = append(errs, o.History.Validate()...)
	if o.Embedded() {
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

// servingHost is how local clients reach the secure port.
func (o *Options) servingHost() string {
	ip := o.SecureServing.BindAddress
	if ip == nil || ip.IsUnspecified() {
		ip = netutils.ParseIPSloppy("127.0.0.1")
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(o.SecureServing.BindPort))
}
