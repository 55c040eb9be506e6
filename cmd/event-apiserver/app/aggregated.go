package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/eventapiserver/event-apiserver/pkg/publicinfo"
	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
)

// AggregatedOptions apply with --aggregated: the server runs behind a
// kube-apiserver as the APIService for events.k8s.io/v1 and trusts that
// kube-apiserver for who a client is, what it may do and which namespaces
// exist, as sample-apiserver and metrics-server do.
type AggregatedOptions struct {
	Enabled bool

	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
	CoreAPI        *genericoptions.CoreAPIOptions
	Admission      *genericoptions.AdmissionOptions
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
		// NamespaceLifecycle refuses Events in missing or terminating
		// namespaces; the webhook and policy plugins apply the cluster's
		// admission configuration to Events, as kube-apiserver would.
		Admission:   genericoptions.NewAdmissionOptions(),
		ServingCert: servingcert.NewOptions(),
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
	o.Admission.AddFlags(fs)
	o.ServingCert.AddFlags(fs)
}

// Complete lets --kubeconfig serve the token and access reviews too, so one
// kubeconfig is enough outside a cluster.
func (o *AggregatedOptions) Complete() {
	if o.Authentication.RemoteKubeConfigFile == "" {
		o.Authentication.RemoteKubeConfigFile = o.CoreAPI.CoreAPIKubeconfigPath
	}
	if o.Authorization.RemoteKubeConfigFile == "" {
		o.Authorization.RemoteKubeConfigFile = o.CoreAPI.CoreAPIKubeconfigPath
	}
}

// aggregatedOnlyFlags lists the flags the user set that only --aggregated
// reads: without it they would be accepted and do nothing, which hides a
// forgotten --aggregated. Priority and fairness counts among them, since
// its configuration lives in kube-apiserver.
func aggregatedOnlyFlags(fss cliflag.NamedFlagSets) []string {
	var set []string
	fss.FlagSet("aggregated").VisitAll(func(f *pflag.Flag) {
		if f.Changed && f.Name != "aggregated" {
			set = append(set, "--"+f.Name)
		}
	})
	if f := fss.FlagSet("features").Lookup("enable-priority-and-fairness"); f != nil && f.Changed && f.Value.String() == "true" {
		set = append(set, "--"+f.Name)
	}
	return set
}

func (o *AggregatedOptions) Validate() []error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	errs = append(errs, o.CoreAPI.Validate()...)
	errs = append(errs, o.Admission.Validate()...)
	errs = append(errs, o.ServingCert.Validate()...)
	return errs
}

// ApplyTo wires delegated authentication, authorization, the client of
// kube-apiserver and admission. Priority and fairness runs too: its
// configuration objects live in kube-apiserver.
func (o *AggregatedOptions) ApplyTo(c *genericapiserver.RecommendedConfig, features *genericoptions.FeatureOptions) error {
	if err := o.Authentication.ApplyTo(&c.Authentication, c.SecureServing, c.OpenAPIConfig); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&c.Authorization); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	if err := o.CoreAPI.ApplyTo(c); err != nil {
		return fmt.Errorf("kube-apiserver client: %w", err)
	}
	kubeClient, err := kubernetes.NewForConfig(c.ClientConfig)
	if err != nil {
		return err
	}
	dynamicClient, err := dynamic.NewForConfig(c.ClientConfig)
	if err != nil {
		return err
	}
	if err := features.ApplyTo(&c.Config, kubeClient, c.SharedInformerFactory); err != nil {
		return err
	}
	return o.Admission.ApplyTo(&c.Config, c.SharedInformerFactory, kubeClient, dynamicClient, c.FeatureGate, c.EffectiveVersion)
}

// servingCertTimeout bounds the wait for the first shared certificate: the
// server cannot serve without one, and a longer wait only hides missing
// RBAC or an unreachable kube-apiserver.
const servingCertTimeout = 2 * time.Minute

// servingCert reads (or makes) the shared serving certificate from
// kube-apiserver and returns the provider that keeps it current.
func (o *AggregatedOptions) servingCert() (*servingcert.Controller, error) {
	// The same kubeconfig (or in-cluster configuration) as the core API
	// client; it is needed before the server's own config is built.
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
	controller := servingcert.New(servingcert.Config{
		Client:          kubeClient,
		APIServices:     aggregator.ApiregistrationV1(),
		APIServiceNames: o.ServingCert.APIServiceNames,
		Namespace:       namespace,
		Name:            name,
		Policy:          o.ServingCert.Policy(),
		Resync:          o.ServingCert.Resync(),
	})
	ctx, cancel := context.WithTimeout(context.Background(), servingCertTimeout)
	defer cancel()
	var lastErr error
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		if lastErr = controller.RunOnce(ctx); lastErr != nil {
			klog.ErrorS(lastErr, "Waiting for the shared serving certificate", "secret", o.ServingCert.Secret)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("shared serving certificate %s: %w", o.ServingCert.Secret, lastErr)
	}
	return controller, nil
}
