package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/eventapiserver/event-apiserver/pkg/publicinfo"
	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
)

// AggregatedOptions are the flags of the modes behind kube-apiserver,
// --aggregated and --history-only: the server is an APIService and trusts
// kube-apiserver for who a client is and what it may do, as sample-apiserver
// and metrics-server do. With --aggregated it also admits Events against
// kube-apiserver's namespaces and admission configuration (admission.go).
type AggregatedOptions struct {
	// Enabled is --aggregated.
	Enabled bool

	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
	CoreAPI        *genericoptions.CoreAPIOptions
	// ServingCert, when its Secret is named, replaces the serving
	// certificate files with one shared by all replicas.
	ServingCert *servingcert.Options
}

func NewAggregatedOptions() *AggregatedOptions {
	return &AggregatedOptions{
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		// The defaults let the health checks and system:masters through
		// without a SubjectAccessReview, as the kubelet's probes need;
		// /version joins them, so anonymous callers see what they see
		// standalone (system:public-info-viewer's paths).
		Authorization: genericoptions.NewDelegatingAuthorizationOptions().WithAlwaysAllowPaths(publicinfo.Paths...),
		CoreAPI:       genericoptions.NewCoreAPIOptions(),
		ServingCert:   servingcert.NewOptions(),
	}
}

func (o *AggregatedOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "aggregated", o.Enabled,
		"Run as an aggregated API server behind kube-apiserver: delegate authentication (front-proxy "+
			"request headers, TokenReview) and authorization (SubjectAccessReview) to it and admit Events "+
			"against its namespaces. Reaches it with --kubeconfig, or the in-cluster configuration.")
	o.Authentication.AddFlags(fs)
	o.Authorization.AddFlags(fs)
	o.CoreAPI.AddFlags(fs)
	o.ServingCert.AddFlags(fs)
}

func (o *AggregatedOptions) Validate() []error {
	var errs []error
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	errs = append(errs, o.CoreAPI.Validate()...)
	errs = append(errs, o.ServingCert.Validate()...)
	return errs
}

// applyDelegationTo wires delegated authentication and authorization and
// the client of kube-apiserver, which both modes behind it have.
// --kubeconfig serves the token and access reviews too, so that one
// kubeconfig is enough outside a cluster.
func (o *AggregatedOptions) applyDelegationTo(c *genericapiserver.RecommendedConfig) error {
	authentication, authorization := *o.Authentication, *o.Authorization
	if authentication.RemoteKubeConfigFile == "" {
		authentication.RemoteKubeConfigFile = o.CoreAPI.CoreAPIKubeconfigPath
	}
	if authorization.RemoteKubeConfigFile == "" {
		authorization.RemoteKubeConfigFile = o.CoreAPI.CoreAPIKubeconfigPath
	}
	if err := authentication.ApplyTo(&c.Authentication, c.SecureServing, c.OpenAPIConfig); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	if err := authorization.ApplyTo(&c.Authorization); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	if err := o.CoreAPI.ApplyTo(c); err != nil {
		return fmt.Errorf("kube-apiserver client: %w", err)
	}
	return nil
}

// applyAggregatedTo wires, beside the delegation, priority and fairness
// (its configuration objects live in kube-apiserver) and the admission
// chain with kube-apiserver's namespaces, webhooks and policies.
func (c *completedOptions) applyAggregatedTo(config *genericapiserver.RecommendedConfig, initializers ...admission.PluginInitializer) error {
	if err := c.Aggregated.applyDelegationTo(config); err != nil {
		return err
	}
	kubeClient, err := kubernetes.NewForConfig(config.ClientConfig)
	if err != nil {
		return err
	}
	dynamicClient, err := dynamic.NewForConfig(config.ClientConfig)
	if err != nil {
		return err
	}
	if err := c.Features.ApplyTo(&config.Config, kubeClient, config.SharedInformerFactory); err != nil {
		return err
	}
	return c.Admission.ApplyTo(&config.Config, config.SharedInformerFactory, kubeClient, dynamicClient, config.FeatureGate, config.EffectiveVersion, initializers...)
}

// servingCertTimeout bounds the wait for the first shared certificate: the
// server cannot serve without one, and a longer wait only hides missing
// RBAC or an unreachable kube-apiserver.
const servingCertTimeout = 2 * time.Minute

// newServingCert is the controller of the shared serving certificate, the
// provider the secure server serves from and runs to keep it current.
func (o *AggregatedOptions) newServingCert() (*servingcert.Controller, error) {
	// The same kubeconfig (or in-cluster configuration) as the core API
	// client, which the server's own config makes only later.
	config, err := clientcmd.BuildConfigFromFlags("", o.CoreAPI.CoreAPIKubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver client for --serving-cert-secret: %w", err)
	}
	kubeClient, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	aggregator, err := aggregatorclient.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	namespace, name := o.ServingCert.SecretRef()
	return servingcert.New(servingcert.Config{
		Client:          kubeClient,
		APIServices:     aggregator.ApiregistrationV1(),
		APIServiceNames: o.ServingCert.APIServiceNames,
		Namespace:       namespace,
		Name:            name,
		Policy:          o.ServingCert.Policy(),
		Resync:          o.ServingCert.Resync(),
	}), nil
}

// awaitServingCert makes or reads the shared certificate once, retrying
// for servingCertTimeout. Run calls it before the configuration is built,
// so that, as with a certificate from files, the secure port is bound only
// once there is a certificate to serve on it; a server that gets none
// exits, and its log says why.
func awaitServingCert(ctx context.Context, controller *servingcert.Controller, secret string) error {
	ctx, cancel := context.WithTimeout(ctx, servingCertTimeout)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		if lastErr = controller.RunOnce(ctx); lastErr != nil {
			klog.ErrorS(lastErr, "Waiting for the shared serving certificate", "secret", secret)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if lastErr == nil {
			lastErr = err
		}
		return fmt.Errorf("shared serving certificate %s: %w", secret, lastErr)
	}
	return nil
}
