// Package app is event-apiserver's command: flags (options.go), then
// Complete → Validate → Run (server.go).
package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/admission"
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
	"github.com/eventapiserver/event-apiserver/pkg/standalone"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/pkg/version"
	"github.com/eventapiserver/event-apiserver/pkg/watchresume"
)

func init() {
	// --logging-format's options are gated, as in kube-apiserver.
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}

// NewCommand builds the cobra command. out receives the one line a user
// needs: how to point kubectl at the server.
func NewCommand(out io.Writer) *cobra.Command {
	o := NewOptions()
	flagSets := o.Flags()
	cmd := &cobra.Command{
		Use:   "event-apiserver",
		Short: "A Kubernetes API server for Events (core/v1 and events.k8s.io/v1)",
		Long: "event-apiserver serves Kubernetes Events, core/v1 and events.k8s.io/v1, from etcd with a TTL, " +
			"reads and watches from an indexed watch cache. Without --etcd-servers it runs its own etcd " +
			"under --data-dir and writes a kubeconfig there.",
		SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates take their final values from flags here, before use.
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
			if set := historyOnlyRefusedFlags(flagSets); o.History.Only && len(set) > 0 {
				return fmt.Errorf("%s do nothing with --history-only, which serves no Events and uses no etcd", strings.Join(set, ", "))
			}
			if set := aggregatedOnlyFlags(flagSets); !o.Aggregated.Enabled && !o.History.Only && len(set) > 0 {
				return fmt.Errorf("%s apply only with --aggregated", strings.Join(set, ", "))
			}
			if set := o.Aggregated.ServingCert.UnusedFlags(flagSets.FlagSet("aggregated")); len(set) > 0 {
				return fmt.Errorf("%s apply only with --serving-cert-secret", strings.Join(set, ", "))
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			// As kube-apiserver: /metrics reports every gate's state
			// (kubernetes_feature_enabled).
			utilfeature.DefaultMutableFeatureGate.AddMetrics()
			klog.InfoS("Starting event-apiserver", "version", version.Get().Version, "kubernetesAPI", "v"+version.KubernetesVersion)
			return o.Run(genericapiserver.SetupSignalContext(), out)
		},
		Args: cobra.NoArgs,
	}
	// Flags libraries register globally (klog's beyond LoggingConfiguration,
	// --help) go into the "global" set, as kube-apiserver does.
	globalflag.AddGlobalFlags(flagSets.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	cmd.AddCommand(newCertsCommand())
	fs := cmd.Flags()
	for _, f := range flagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, flagSets, cols)
	return cmd
}

// Run starts etcd if embedded, then the API server, until ctx ends.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	if o.writesDataDir() {
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return fmt.Errorf("creating data dir: %w", err)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// fatal carries why the server stopped on its own, so that the process
	// exits non-zero and a supervisor (Restart=on-failure) restarts it.
	fatal := make(chan error, 1)
	switch {
	case o.History.Only:
		// No etcd at all.
	case o.Embedded():
		embedded, err := etcd.StartEmbedded(etcd.EmbeddedConfig{
			DataDir:                filepath.Join(o.DataDir, "etcd"),
			ClientAddress:          o.EmbeddedEtcd.ClientAddress,
			ProgressNotifyInterval: o.EmbeddedEtcd.ProgressNotifyInterval,
			ReadyTimeout:           o.EmbeddedEtcd.ReadyTimeout,
			QuotaBackendBytes:      o.EmbeddedEtcd.QuotaBackendBytes,
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
		o.Etcd.StorageConfig.Transport.ServerList = []string{embedded.ClientURL()}
	default:
		go watchresume.WarnWithoutProgressNotify(ctx, o.Etcd.StorageConfig.Transport, o.Etcd.StorageConfig.Prefix, watchresume.ProgressCheckTimeout)
	}

	config, err := o.Config()
	if err != nil {
		return err
	}
	server, err := config.Complete().New()
	if err != nil {
		return err
	}
	prepared := server.GenericAPIServer.PrepareRun()
	if o.selfSigned != nil {
		// Renewed while running too: the server reloads the files.
		go o.selfSigned.Renew(ctx)
	}

	kubeconfig := ""
	if !o.Aggregated.Enabled {
		if kubeconfig, err = o.writeAdminKubeconfig(); err != nil {
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

// writeAdminKubeconfig hands the admin credentials to kubectl, trusting the
// serving certificate's CA.
func (o *Options) writeAdminKubeconfig() (string, error) {
	adminToken, err := standalone.LoadOrCreateAdminToken(o.DataDir)
	if err != nil {
		return "", err
	}
	// The self-signed CA, not the leaf, so that the kubeconfig keeps
	// working when the leaf is renewed.
	caFile := o.SecureServing.ServerCert.CertKey.CertFile
	if o.selfSigned != nil {
		caFile = o.selfSigned.CAFile()
	}
	caBundle, err := os.ReadFile(caFile)
	if err != nil {
		return "", fmt.Errorf("reading serving certificate: %w", err)
	}
	kubeconfig := filepath.Join(o.DataDir, "kubeconfig")
	return kubeconfig, standalone.WriteKubeconfig(kubeconfig, "https://"+o.servingHost(), caBundle, adminToken)
}

// Config builds the server configuration from the options.
func (o *Options) Config() (*apiserver.Config, error) {
	alternateIPs := []net.IP{netutils.ParseIPSloppy("127.0.0.1")}
	if ip := o.SecureServing.BindAddress; ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		alternateIPs = append(alternateIPs, ip)
	}
	if certKey := &o.SecureServing.ServerCert.CertKey; o.Aggregated.Enabled && o.Aggregated.ServingCert.Enabled() {
		// The generic secure server runs the controller and reloads the
		// certificate whenever it changes.
		provider, err := o.Aggregated.servingCert()
		if err != nil {
			return nil, err
		}
		o.SecureServing.ServerCert.GeneratedCert = provider
	} else if certKey.CertFile == "" && certKey.KeyFile == "" {
		o.selfSigned = &standalone.ServingCert{
			Dir:      o.SecureServing.ServerCert.CertDirectory,
			Host:     "localhost",
			DNSNames: o.SelfSignedCertDNSNames,
			IPs:      alternateIPs,
			Validity: o.SelfSignedCertValidity,
		}
		if _, err := o.selfSigned.Ensure(); err != nil {
			return nil, fmt.Errorf("creating self-signed serving certificate: %w", err)
		}
		certKey.CertFile, certKey.KeyFile = o.selfSigned.CertFile(), o.selfSigned.KeyFile()
	}

	serverConfig := genericapiserver.NewRecommendedConfig(apiserver.Codecs)

	namer := openapinamer.NewDefinitionNamer(apiserver.Scheme)
	serverConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIConfig.Info.Title = "event-apiserver"
	serverConfig.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIV3Config.Info.Title = "event-apiserver"

	if err := o.SecureServing.ApplyTo(&serverConfig.SecureServing, &serverConfig.LoopbackClientConfig); err != nil {
		return nil, err
	}
	if err := o.ServerRun.ApplyTo(&serverConfig.Config); err != nil {
		return nil, err
	}
	if err := o.Audit.ApplyTo(&serverConfig.Config); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// After ServerRun, which sets the registry's version.
	serverConfig.EffectiveVersion = effectiveVersion()
	ttlRules, err := ttl.Parse(o.EventTTLRules, o.EventTTL)
	if err != nil {
		return nil, err
	}
	if o.History.Only {
		return o.historyOnlyConfig(serverConfig, ttlRules)
	}
	if err := apiserver.ApplyStorageTo(serverConfig, o.Etcd, ttlRules, !o.Embedded(), expiry.New(o.Expiry.Config(ttlRules))); err != nil {
		return nil, err
	}
	if o.Aggregated.Enabled {
		if err := o.Aggregated.ApplyTo(serverConfig, o.Features); err != nil {
			return nil, err
		}
	} else {
		adminToken, err := standalone.LoadOrCreateAdminToken(o.DataDir)
		if err != nil {
			return nil, err
		}
		serverConfig.Authentication.Authenticator = standalone.NewAuthenticator(adminToken)
		serverConfig.Authorization.Authorizer, serverConfig.RuleResolver = standalone.NewAuthorizer()
		if err := o.Features.ApplyTo(&serverConfig.Config, nil, nil); err != nil {
			return nil, err
		}
	}
	// The storm limiter admits first, before the aggregated chain's
	// webhooks, so that a throttled write costs no webhook call; it checks
	// the size again in the validating phase, after them. It decides once
	// per request, even when an update is retried on a conflict.
	stormPlugin := storm.New(o.Storm.Config())
	if serverConfig.AdmissionControl != nil {
		serverConfig.AdmissionControl = admission.NewChainHandler(stormPlugin, serverConfig.AdmissionControl)
	} else {
		serverConfig.AdmissionControl = stormPlugin
	}
	serverConfig.RequestInfoResolver = fieldselectors.RequestInfoResolver(genericapiserver.NewRequestInfoResolver(&serverConfig.Config))
	buildChain := serverConfig.BuildHandlerChainFunc
	serverConfig.BuildHandlerChainFunc = func(api http.Handler, c *genericapiserver.Config) http.Handler {
		// Set-based field selectors are rewritten before the handlers
		// decode them (fieldselectors/setselector.go).
		return buildChain(fieldselectors.WithSetSelectors(stormPlugin.WithEarlyRefusal(storm.WithChargeMemo(api), apiserver.Codecs)), c)
	}

	history, err := o.History.Config(o.DataDir, o.Etcd.StorageConfig)
	if err != nil {
		return nil, err
	}
	return &apiserver.Config{
		GenericConfig: serverConfig,
		ExtraConfig:   apiserver.ExtraConfig{TTL: ttlRules, History: history},
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
