package app

import (
	"fmt"

	"github.com/spf13/pflag"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/eventmetrics"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
)

// The history-only server (--history-only) serves history.eventapiserver.io
// alone, behind its own APIService, and captures Events through
// kube-apiserver's API. It needs what every conformant cluster offers,
// managed ones included: the aggregation layer, TokenReview and
// SubjectAccessReview (delegated as with --aggregated), and RBAC to list and
// watch Events. It has no Events storage, no etcd, no admission (it takes no
// writes) and no priority and fairness (whose configuration would need more
// RBAC); the max-in-flight limits apply.

// historyOnlyRefusedFlags lists the flags the user set that do nothing
// with --history-only: the Events API's and etcd's, admission's and
// --aggregated itself, which serves Events.
func historyOnlyRefusedFlags(fss cliflag.NamedFlagSets) []string {
	var set []string
	changed := func(f *pflag.Flag) {
		if f.Changed {
			set = append(set, "--"+f.Name)
		}
	}
	for _, name := range []string{"etcd", "embedded etcd", "event storms"} {
		fss.FlagSet(name).VisitAll(changed)
	}
	admission := pflag.NewFlagSet("admission", pflag.ContinueOnError)
	genericoptions.NewAdmissionOptions().AddFlags(admission)
	admission.VisitAll(func(a *pflag.Flag) {
		if f := fss.FlagSet("aggregated").Lookup(a.Name); f != nil {
			changed(f)
		}
	})
	for _, name := range []string{"event-ttl", "event-ttl-rule"} {
		if f := fss.FlagSet("event-apiserver").Lookup(name); f != nil {
			changed(f)
		}
	}
	changed(fss.FlagSet("aggregated").Lookup("aggregated"))
	changed(fss.FlagSet("history").Lookup("history"))
	if f := fss.FlagSet("features").Lookup("enable-priority-and-fairness"); f != nil && f.Changed && f.Value.String() == "true" {
		set = append(set, "--"+f.Name)
	}
	return set
}

// completeHistoryOnly turns on the delegated authentication and
// authorization that --aggregated has.
func (o *Options) completeHistoryOnly() {
	o.Aggregated.Enabled = true
	o.Aggregated.Complete()
	o.Features.EnablePriorityAndFairness = false
}

func (o *Options) validateHistoryOnly() []error {
	var errs []error
	if !o.History.Enabled {
		errs = append(errs, fmt.Errorf("--history-only needs --history"))
	}
	return errs
}

// applyHistoryOnlyTo wires delegated authentication and authorization and
// the client of kube-apiserver; none of --aggregated's admission.
func (o *Options) applyHistoryOnlyTo(c *genericapiserver.RecommendedConfig) error {
	a := o.Aggregated
	if err := a.Authentication.ApplyTo(&c.Authentication, c.SecureServing, c.OpenAPIConfig); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	if err := a.Authorization.ApplyTo(&c.Authorization); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	if err := a.CoreAPI.ApplyTo(c); err != nil {
		return fmt.Errorf("kube-apiserver client: %w", err)
	}
	return o.Features.ApplyTo(&c.Config, nil, nil)
}

// historyOnlyConfig finishes the configuration of a history-only server.
func (o *Options) historyOnlyConfig(serverConfig *genericapiserver.RecommendedConfig, ttlRules *ttl.Rules, events *eventmetrics.Counter) (*apiserver.Config, error) {
	if err := o.applyHistoryOnlyTo(serverConfig); err != nil {
		return nil, err
	}
	history, err := o.History.KubeConfig(o.DataDir, serverConfig.ClientConfig, events)
	if err != nil {
		return nil, err
	}
	return &apiserver.Config{
		GenericConfig: serverConfig,
		ExtraConfig:   apiserver.ExtraConfig{TTL: ttlRules, History: history, HistoryOnly: true},
	}, nil
}
