// Package app is event-apiserver's command: flags (options.go), then
// Complete (the mode, modes.go) → Validate → Run (server.go), which prepares
// what the configuration needs of a running process, builds the Config and
// runs the server.
package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/pkg/expiry"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	generatedopenapi "github.com/eventapiserver/event-apiserver/pkg/generated/openapi"
	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
	"github.com/eventapiserver/event-apiserver/pkg/standalone"
	"github.com/eventapiserver/event-apiserver/pkg/version"
	"github.com/eventapiserver/event-apiserver/pkg/watchresume"
)

func init() {
	// --logging-format's options are gated, as in kube-apiserver.
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}

// commandName is the command's name in --help and the global flags' usage.
const commandName = "event-apiserver"

// NewCommand builds the cobra command. out receives the one line a user
// needs: how to point kubectl at the server.
func NewCommand(out io.Writer) *cobra.Command {
	o := NewOptions()
	flagSets := o.commandFlags()
	cmd := &cobra.Command{
		Use:   commandName,
		Short: "A Kubernetes API server for Events (core/v1 and events.k8s.io/v1)",
		Long: "event-apiserver serves Kubernetes Events, core/v1 and events.k8s.io/v1, from etcd with a TTL, " +
			"reads and watches from an indexed watch cache. Without --etcd-servers it runs its own etcd " +
			"under --data-dir and writes a kubeconfig there.",
		SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates take their values from flags here, before use.
			return compatibility.DefaultComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Version.Print(out, *effectiveVersion().Info()) {
				return nil
			}
			// As kube-apiserver: logging takes its final form first, so
			// everything after is logged in the chosen format.
			if err := logsapi.ValidateAndApply(o.Logs, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			c, err := o.Complete(flagSets)
			if err != nil {
				return err
			}
			if err := c.Validate(); err != nil {
				return err
			}
			if err := c.setFeatureDefaults(utilfeature.DefaultMutableFeatureGate); err != nil {
				return err
			}
			// As kube-apiserver: /metrics reports every gate's final state
			// (kubernetes_feature_enabled).
			utilfeature.DefaultMutableFeatureGate.AddMetrics()
			klog.InfoS("Starting event-apiserver", "version", version.Get().Version, "kubernetesAPI", "v"+version.KubernetesVersion, "mode", c.mode)
			return c.Run(genericapiserver.SetupSignalContext(), out)
		},
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newCertsCommand())
	fs := cmd.Flags()
	for _, f := range flagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, flagSets, cols)
	return cmd
}

// commandFlags are the command's flags in --help's sections: the options',
// and those libraries register globally (klog's beyond
// LoggingConfiguration, --help) in "global", as kube-apiserver puts them.
func (o *Options) commandFlags() cliflag.NamedFlagSets {
	fss := o.Flags()
	globalflag.AddGlobalFlags(fss.FlagSet("global"), commandName, logs.SkipLoggingConfigurationFlags())
	return fss
}

// FlagSets are the command's flags as --help groups them, which
// hack/update-flags-docs.sh renders into docs/flags.md.
func FlagSets() cliflag.NamedFlagSets {
	return NewOptions().commandFlags()
}

// prerequisites are what Run prepares before the configuration is built:
// what only a running process knows (the embedded etcd's address) and what
// may block or writes under --data-dir (the serving certificate, the admin
// token). Config reads them and the options, and writes neither.
type prerequisites struct {
	// etcdServers, when set, are the embedded etcd's address.
	etcdServers []string
	// selfSigned is the serving certificate made when none is given;
	// sharedCert the one of --serving-cert-secret, already served once.
	// Neither with --tls-cert-file.
	selfSigned *standalone.ServingCert
	sharedCert *servingcert.Controller
	// adminToken is a standalone server's one credential.
	adminToken string
}

// Run starts etcd if embedded, gets the serving certificate, then runs the
// API server until ctx ends.
func (c *completedOptions) Run(ctx context.Context, out io.Writer) error {
	if c.writesDataDir() {
		if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
			return fmt.Errorf("creating data dir: %w", err)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// fatal carries why the server stopped on its own, so that the process
	// exits non-zero and a supervisor (Restart=on-failure) restarts it.
	fatal := make(chan error, 1)
	var p prerequisites
	switch {
	case !c.mode.ServesEvents():
		// No etcd at all.
	case c.embeddedEtcd:
		embedded, err := etcd.StartEmbedded(etcd.EmbeddedConfig{
			DataDir:                filepath.Join(c.DataDir, "etcd"),
			ClientAddress:          c.EmbeddedEtcd.ClientAddress,
			ProgressNotifyInterval: c.EmbeddedEtcd.ProgressNotifyInterval,
			ReadyTimeout:           c.EmbeddedEtcd.ReadyTimeout,
			QuotaBackendBytes:      c.EmbeddedEtcd.QuotaBackendBytes,
		})
		if err != nil {
			return err
		}
		// Deferred before the server starts, so it runs after the server
		// has drained: etcd closes last and loses nothing acknowledged.
		// The failure watch below is cancelled first, so that closing is
		// not mistaken for a failure.
		defer func() {
			cancel()
			embedded.Close()
		}()
		go func() {
			select {
			case err := <-embedded.Err():
				klog.ErrorS(err, "Embedded etcd failed, shutting down")
				fatal <- fmt.Errorf("embedded etcd failed: %w", err)
				cancel()
			case <-ctx.Done():
			}
		}()
		p.etcdServers = []string{embedded.ClientURL()}
	default:
		go watchresume.WarnWithoutProgressNotify(ctx, c.Etcd.StorageConfig.Transport, c.Etcd.StorageConfig.Prefix, watchresume.ProgressCheckTimeout)
	}
	if err := c.prepareServingCert(ctx, &p); err != nil {
		return err
	}
	if c.mode == apiserver.Standalone {
		var err error
		if p.adminToken, err = standalone.LoadOrCreateAdminToken(c.DataDir); err != nil {
			return err
		}
	}

	config, err := c.Config(p)
	if err != nil {
		return err
	}
	server, err := config.Complete().New()
	if err != nil {
		return err
	}
	prepared := server.GenericAPIServer.PrepareRun()
	if p.selfSigned != nil {
		// Renewed while running too: the server reloads the files.
		go p.selfSigned.Renew(ctx)
	}

	kubeconfig := ""
	if c.mode == apiserver.Standalone {
		if kubeconfig, err = c.writeAdminKubeconfig(p); err != nil {
			return err
		}
	}
	go announceWhenReady(ctx, server.GenericAPIServer.LoopbackClientConfig, kubeconfig, out)
	runErr := prepared.RunWithContext(ctx)
	select {
	case err := <-fatal:
		return err
	default:
		return runErr
	}
}

// prepareServingCert makes the self-signed certificate, or gets the shared
// one: the wait for it (up to servingCertTimeout) belongs to starting the
// server, before the secure port is bound, not to building its
// configuration.
func (c *completedOptions) prepareServingCert(ctx context.Context, p *prerequisites) error {
	switch {
	case c.sharedCert():
		controller, err := c.Aggregated.newServingCert()
		if err != nil {
			return err
		}
		if err := awaitServingCert(ctx, controller, c.Aggregated.ServingCert.Secret); err != nil {
			return err
		}
		p.sharedCert = controller
	case c.selfSignedCert():
		ips := []net.IP{netutils.ParseIPSloppy("127.0.0.1")}
		if ip := c.SecureServing.BindAddress; ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
			ips = append(ips, ip)
		}
		p.selfSigned = &standalone.ServingCert{
			Dir:      c.SecureServing.ServerCert.CertDirectory,
			Host:     "localhost",
			DNSNames: c.SelfSignedCertDNSNames,
			IPs:      ips,
			Validity: c.SelfSignedCertValidity,
		}
		if _, err := p.selfSigned.Ensure(); err != nil {
			return fmt.Errorf("creating self-signed serving certificate: %w", err)
		}
	}
	return nil
}

// writeAdminKubeconfig hands the admin credentials to kubectl, trusting the
// serving certificate's CA.
func (c *completedOptions) writeAdminKubeconfig(p prerequisites) (string, error) {
	// The self-signed CA, not the leaf, so that the kubeconfig keeps
	// working when the leaf is renewed.
	caFile := c.SecureServing.ServerCert.CertKey.CertFile
	if p.selfSigned != nil {
		caFile = p.selfSigned.CAFile()
	}
	caBundle, err := os.ReadFile(caFile)
	if err != nil {
		return "", fmt.Errorf("reading serving certificate: %w", err)
	}
	kubeconfig := filepath.Join(c.DataDir, "kubeconfig")
	return kubeconfig, standalone.WriteKubeconfig(kubeconfig, "https://"+c.servingHost(), caBundle, p.adminToken)
}

// Config builds the server configuration from the options and what Run
// prepared, and writes neither: a generic ApplyTo that writes into its
// options (the secure port's listener) is given a copy.
func (c *completedOptions) Config(p prerequisites) (*apiserver.Config, error) {
	serverConfig := genericapiserver.NewRecommendedConfig(apiserver.Codecs)

	namer := openapinamer.NewDefinitionNamer(apiserver.Scheme)
	serverConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIConfig.Info.Title = "event-apiserver"
	serverConfig.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIV3Config.Info.Title = "event-apiserver"

	serving := *c.SecureServing.SecureServingOptions
	switch {
	case p.sharedCert != nil:
		// The generic secure server runs the controller and reloads the
		// certificate whenever it changes.
		serving.ServerCert.GeneratedCert = p.sharedCert
	case p.selfSigned != nil:
		serving.ServerCert.CertKey.CertFile, serving.ServerCert.CertKey.KeyFile = p.selfSigned.CertFile(), p.selfSigned.KeyFile()
	}
	if err := serving.WithLoopback().ApplyTo(&serverConfig.SecureServing, &serverConfig.LoopbackClientConfig); err != nil {
		return nil, err
	}
	if err := c.ServerRun.ApplyTo(&serverConfig.Config); err != nil {
		return nil, err
	}
	if err := c.Audit.ApplyTo(&serverConfig.Config); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// After ServerRun, which sets the registry's version.
	serverConfig.EffectiveVersion = effectiveVersion()
	// Set-based field selectors are resolved once, before the chain, and
	// the handlers decode the result (fieldselectors/setselector.go), in
	// every mode: eventrecords take them as Events do.
	serverConfig.RequestInfoResolver = fieldselectors.RequestInfoResolver(genericapiserver.NewRequestInfoResolver(&serverConfig.Config))
	buildChain := serverConfig.BuildHandlerChainFunc
	serverConfig.BuildHandlerChainFunc = func(api http.Handler, c *genericapiserver.Config) http.Handler {
		return fieldselectors.WithSetSelectors(buildChain(fieldselectors.WithResolvedSelectors(api), c), c.RequestInfoResolver)
	}
	events := c.EventMetrics.Counter()
	if c.mode == apiserver.HistoryOnly {
		return c.historyOnlyConfig(serverConfig, events)
	}

	etcd := *c.Etcd
	if p.etcdServers != nil {
		etcd.StorageConfig.Transport.ServerList = p.etcdServers
	}
	if err := apiserver.ApplyStorageTo(serverConfig, &etcd, c.ttl, !c.embeddedEtcd, expiry.New(c.Expiry.Config(c.ttl))); err != nil {
		return nil, err
	}
	// The storm limiter is an admission plugin (admission.go); limits
	// gives it the --event-rate-limit-* flags and hands the handler chain
	// the plugin the admission chain holds.
	limits := storm.NewInitializer(c.Storm.Config())
	if c.mode == apiserver.Aggregated {
		if err := c.applyAggregatedTo(serverConfig, limits); err != nil {
			return nil, err
		}
	} else {
		serverConfig.Authentication.Authenticator = standalone.NewAuthenticator(p.adminToken)
		serverConfig.Authorization.Authorizer, serverConfig.RuleResolver = standalone.NewAuthorizer()
		// Priority and fairness reads its configuration from the
		// flowcontrol.apiserver.k8s.io API, which only kube-apiserver
		// serves; alone, the max-in-flight limits apply instead.
		features := *c.Features
		features.EnablePriorityAndFairness = false
		if err := features.ApplyTo(&serverConfig.Config, nil, nil); err != nil {
			return nil, err
		}
		if err := applyStandaloneAdmissionTo(&serverConfig.Config, c.Admission, limits); err != nil {
			return nil, err
		}
	}
	limiter := limits.Plugin()
	withSelectors := serverConfig.BuildHandlerChainFunc
	serverConfig.BuildHandlerChainFunc = func(api http.Handler, c *genericapiserver.Config) http.Handler {
		if limiter != nil {
			// The limiter decides once per request, even when an update
			// is retried on a conflict, and refuses a writer that keeps
			// writing once refused before the API handler starts.
			api = limiter.WithEarlyRefusal(storm.WithChargeMemo(api), apiserver.Codecs)
		}
		return withSelectors(api, c)
	}

	history, err := c.History.Config(c.DataDir, etcd.StorageConfig)
	if err != nil {
		return nil, err
	}
	return &apiserver.Config{
		GenericConfig: serverConfig,
		ExtraConfig:   apiserver.ExtraConfig{TTL: c.ttl, History: history, Mode: c.mode, EventMetrics: events},
	}, nil
}

// effectiveVersion reports the Kubernetes version whose libraries the server
// is built on, so clients see the API behaviour of that release, and this
// build's version in gitVersion's build metadata (pkg/version).
func effectiveVersion() basecompatibility.EffectiveVersion {
	return apiVersion{basecompatibility.NewEffectiveVersionFromString(version.KubernetesVersion, "", "")}
}

// apiVersion fills /version's build fields from pkg/version; component-base
// would report its own ldflags, which this binary does not set
// ("v0.0.0-master+$Format:%H$", which kubectl version cannot parse).
type apiVersion struct {
	basecompatibility.EffectiveVersion
}

func (v apiVersion) Info() *apimachineryversion.Info {
	info := v.EffectiveVersion.Info()
	if info != nil {
		version.Get().Fill(info)
	}
	return info
}

// announceWhenReady prints the kubeconfig line (standalone) once /readyz
// answers ok, so a user who copies it gets a server that serves.
func announceWhenReady(ctx context.Context, loopback *rest.Config, kubeconfig string, out io.Writer) {
	client, err := rest.UnversionedRESTClientFor(withNoGroup(loopback))
	if err != nil {
		klog.ErrorS(err, "Cannot check readiness")
		return
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var status int
		client.Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		return status == http.StatusOK, nil
	})
	if err != nil {
		return
	}
	if kubeconfig == "" {
		klog.InfoS("Ready")
		return
	}
	klog.InfoS("Ready", "kubeconfig", kubeconfig)
	fmt.Fprintf(out, "export KUBECONFIG=%s\n", kubeconfig)
}

func withNoGroup(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.GroupVersion = nil
	c.NegotiatedSerializer = apiserver.Codecs.WithoutConversion()
	return c
}
