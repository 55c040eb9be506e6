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
	"k8s.io/apimachinery/pkg/util/wait"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/admission"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	etcdmetrics "k8s.io/apiserver/pkg/storage/etcd3/metrics"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/pkg/etcdhealth"
	generatedopenapi "github.com/eventapiserver/event-apiserver/pkg/generated/openapi"
	"github.com/eventapiserver/event-apiserver/pkg/standalone"
	"github.com/eventapiserver/event-apiserver/pkg/watchresume"
)

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
			if set := aggregatedOnlyFlags(flagSets); !o.Aggregated.Enabled && len(set) > 0 {
				return fmt.Errorf("%s apply only with --aggregated", strings.Join(set, ", "))
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(genericapiserver.SetupSignalContext(), out)
		},
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	for _, f := range flagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	return cmd
}

// Run starts etcd if embedded, then the API server, until ctx ends.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Embedded() {
		embedded, err := etcd.StartEmbedded(etcd.EmbeddedConfig{
			DataDir:                filepath.Join(o.DataDir, "etcd"),
			ClientAddress:          o.EmbeddedEtcd.ClientAddress,
			ProgressNotifyInterval: o.EmbeddedEtcd.ProgressNotifyInterval,
			ReadyTimeout:           o.EmbeddedEtcd.ReadyTimeout,
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
				cancel()
			case <-ctx.Done():
			}
		}()
		o.Etcd.StorageConfig.Transport.ServerList = []string{embedded.ClientURL()}
	} else {
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

	kubeconfig := ""
	if !o.Aggregated.Enabled {
		if kubeconfig, err = o.writeAdminKubeconfig(); err != nil {
			return err
		}
	}
	go announceWhenReady(ctx, server.GenericAPIServer.LoopbackClientConfig, kubeconfig, out)
	return prepared.RunWithContext(ctx)
}

// writeAdminKubeconfig hands the admin credentials to kubectl, trusting the
// serving certificate's CA.
func (o *Options) writeAdminKubeconfig() (string, error) {
	adminToken, err := standalone.LoadOrCreateAdminToken(o.DataDir)
	if err != nil {
		return "", err
	}
	caBundle, err := os.ReadFile(o.SecureServing.ServerCert.CertKey.CertFile)
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
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", o.SelfSignedCertDNSNames, alternateIPs); err != nil {
		return nil, fmt.Errorf("creating self-signed serving certificate: %w", err)
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
	// After ServerRun, which sets the registry's version.
	serverConfig.EffectiveVersion = effectiveVersion()
	storageFactory := apiserver.NewStorageFactory(o.Etcd.StorageConfig, o.Etcd.DefaultStorageMediaType)
	if err := o.Etcd.ApplyWithStorageFactoryTo(storageFactory, &serverConfig.Config); err != nil {
		return nil, err
	}
	etcdGate := etcdhealth.NewGate()
	// After ApplyWithStorageFactoryTo, which installs the getter that hangs.
	etcdmetrics.SetStorageMonitorGetter(etcdGate.Monitors)
	serverConfig.AddPostStartHookOrDie("event-etcd-health-probe", func(ctx genericapiserver.PostStartHookContext) error {
		return etcdGate.Run(ctx, o.Etcd.StorageConfig)
	})
	serverConfig.RESTOptionsGetter = watchresume.NewRESTOptionsGetter(serverConfig.RESTOptionsGetter, etcdGate.Storage)
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
	// The storm limiter validates last, after the aggregated chain's
	// NamespaceLifecycle and webhooks, right before a write reaches etcd.
	stormPlugin := storm.New(o.Storm.Config())
	if serverConfig.AdmissionControl != nil {
		serverConfig.AdmissionControl = admission.NewChainHandler(serverConfig.AdmissionControl, stormPlugin)
	} else {
		serverConfig.AdmissionControl = stormPlugin
	}

	history, err := o.History.Config(o.DataDir, o.Etcd.StorageConfig)
	if err != nil {
		return nil, err
	}
	return &apiserver.Config{
		GenericConfig: serverConfig,
		ExtraConfig:   apiserver.ExtraConfig{EventTTL: o.EventTTL, History: history},
	}, nil
}

// effectiveVersion reports the Kubernetes version whose libraries the server
// is built on, so clients see the API behaviour of that release.
func effectiveVersion() basecompatibility.EffectiveVersion {
	return apiVersion{basecompatibility.NewEffectiveVersionFromString(apiserverLibraryVersion, "", "")}
}

// apiserverLibraryVersion is the k8s.io/apiserver release go.mod pins.
const apiserverLibraryVersion = "1.36.3"

// apiVersion fills /version's gitVersion when the binary was built without
// version ldflags (go build, go run): component-base then reports
// "v0.0.0-master+$Format:%H$", which kubectl version cannot parse. The API
// served is that of the pinned release, so that is what /version says.
type apiVersion struct {
	basecompatibility.EffectiveVersion
}

func (v apiVersion) Info() *apimachineryversion.Info {
	info := v.EffectiveVersion.Info()
	if info != nil && strings.HasPrefix(info.GitVersion, "v0.0.0-") {
		info.GitVersion = "v" + apiserverLibraryVersion
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
