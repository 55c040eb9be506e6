package app

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	admissionmetrics "k8s.io/apiserver/pkg/admission/metrics"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
)

// The admission chain. The storm limiter is an admission plugin
// (storm.PluginName) registered beside k8s.io/apiserver's own, first in the
// recommended order, so that it charges a write before any webhook is
// called and a storm does not become a storm of webhook calls; it checks
// an Event's size in the validating phase, after the mutating webhooks.
// --enable-admission-plugins and --disable-admission-plugins know it in
// both modes that serve Events. Standalone there is no kube-apiserver,
// which NamespaceLifecycle (namespaces), the webhooks and the admission
// policies (their configuration objects) read, so the limiter runs alone:
// naming one of those plugins, or an admission configuration file, which
// the limiter does not read, is refused (modes.go) rather than silently
// ignored. A history-only server takes no writes and has no admission.

// newAdmissionOptions are k8s.io/apiserver's admission options with the
// storm limiter registered and on by default.
func newAdmissionOptions() *genericoptions.AdmissionOptions {
	a := genericoptions.NewAdmissionOptions()
	storm.Register(a.Plugins)
	// NamespaceLifecycle refuses Events in missing or terminating
	// namespaces; the webhook and policy plugins apply the cluster's
	// admission configuration to Events, as kube-apiserver would.
	a.RecommendedPluginOrder = append([]string{storm.PluginName}, a.RecommendedPluginOrder...)
	return a
}

// standalonePlugins are the plugins a standalone server can run: those that
// need nothing from kube-apiserver.
var standalonePlugins = sets.New(storm.PluginName)

func addAdmissionFlags(a *genericoptions.AdmissionOptions, fs *pflag.FlagSet) {
	a.AddFlags(fs)
	for _, name := range []string{"enable-admission-plugins", "disable-admission-plugins"} {
		f := fs.Lookup(name)
		f.Usage += " Without --aggregated only " + storm.PluginName + " runs (the others need kube-apiserver); --history-only has no admission."
	}
	f := fs.Lookup("admission-control-config-file")
	f.Usage += " Only with --aggregated; " + storm.PluginName + " takes none (its limits are the --event-rate-limit-* flags)."
}

// standaloneAdmissionErrors refuses what admission flags ask of a
// standalone server that it cannot do.
func (c *completedOptions) standaloneAdmissionErrors() []error {
	var errs []error
	for _, flag := range []struct {
		name    string
		plugins []string
		why     string
	}{
		{"enable-admission-plugins", c.Admission.EnablePlugins, "needs --aggregated: it reads kube-apiserver; a standalone server runs only " + storm.PluginName},
		{"disable-admission-plugins", c.Admission.DisablePlugins, "does nothing without --aggregated: a standalone server runs only " + storm.PluginName},
	} {
		for _, name := range flag.plugins {
			// Unknown names are the generic validation's to refuse.
			if !standalonePlugins.Has(name) && slices.Contains(c.Admission.Plugins.Registered(), name) {
				errs = append(errs, fmt.Errorf("--%s=%s %s", flag.name, name, flag.why))
			}
		}
	}
	if c.Admission.ConfigFile != "" {
		errs = append(errs, fmt.Errorf("--admission-control-config-file applies only with --aggregated: a standalone server runs only %s, which takes no configuration", storm.PluginName))
	}
	return errs
}

// enabledPlugins lists, in the recommended order, the plugins the admission
// flags leave on: k8s.io/apiserver's AdmissionOptions.ApplyTo computes the
// same list for the aggregated chain, but keeps it to itself.
func enabledPlugins(a *genericoptions.AdmissionOptions) []string {
	off := sets.New(a.DisablePlugins...).Union(a.DefaultOffPlugins).Difference(sets.New(a.EnablePlugins...))
	var names []string
	for _, name := range a.RecommendedPluginOrder {
		if !off.Has(name) {
			names = append(names, name)
		}
	}
	return names
}

// applyStandaloneAdmissionTo builds the standalone admission chain: the
// plugins the flags leave on among those it can run, instrumented as
// AdmissionOptions.ApplyTo instruments the aggregated one.
func applyStandaloneAdmissionTo(c *genericapiserver.Config, a *genericoptions.AdmissionOptions, initializers ...admission.PluginInitializer) error {
	names := slices.DeleteFunc(enabledPlugins(a), func(name string) bool { return !standalonePlugins.Has(name) })
	config, err := admission.ReadAdmissionConfiguration(names, "", nil)
	if err != nil {
		return err
	}
	chain, err := a.Plugins.NewFromPlugins(names, config, admission.PluginInitializers(initializers), a.Decorators)
	if err != nil {
		return err
	}
	c.AdmissionControl = admissionmetrics.WithStepMetrics(chain)
	return nil
}
