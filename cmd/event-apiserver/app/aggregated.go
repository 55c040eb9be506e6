package app

import (
	"fmt"

	"github.com/spf13/pflag"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/eventapiserver/event-apiserver/pkg/publicinfo"
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
		Admission: genericoptions.NewAdmissionOptions(),
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
