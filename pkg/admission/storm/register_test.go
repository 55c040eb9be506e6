package storm

import (
	"context"
	"io"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
)

// configs is an admission configuration file's content by plugin name.
type configs map[string]string

func (c configs) ConfigFor(name string) (io.Reader, error) {
	if s, ok := c[name]; ok {
		return strings.NewReader(s), nil
	}
	return nil, nil
}

// askReinvocation is a mutating plugin that asks the chain to run its
// mutating plugins again, as a mutating webhook with reinvocationPolicy
// IfNeeded does after it changed the object.
type askReinvocation struct{ *admission.Handler }

func (askReinvocation) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if !a.GetReinvocationContext().IsReinvoke() {
		a.GetReinvocationContext().SetShouldReinvoke()
	}
	return nil
}

// TestRegisteredPlugin builds the admission chain by name, as the server
// does from --enable-admission-plugins: the plugin gets the Initializer's
// limits, the Initializer hands the handler chain that same plugin, and a
// write is charged once even when the chain's mutating plugins run twice.
func TestRegisteredPlugin(t *testing.T) {
	plugins := admission.NewPlugins()
	Register(plugins)
	plugins.Register("AskReinvocation", func(io.Reader) (admission.Interface, error) {
		return askReinvocation{admission.NewHandler(admission.Create)}, nil
	})

	t.Run("limits and reinvocation", func(t *testing.T) {
		clock := newFakeClock()
		init := NewInitializer(Config{Create: limitOf(1, 2), MaxReporters: 10, Now: clock.now})
		chain, err := plugins.NewFromPlugins([]string{PluginName, "AskReinvocation"}, configs{}, init, nil)
		if err != nil {
			t.Fatal(err)
		}
		if init.Plugin() == nil || init.Plugin().limiter == nil {
			t.Fatalf("the Initializer holds %v, want the configured plugin", init.Plugin())
		}
		admit := func(name string) error {
			return chain.(admission.MutationInterface).Admit(context.Background(),
				attrs(kubeletEvent(name, "node-1"), admission.Create, coreEvents, false), nil)
		}
		// A burst of two: each create is charged once although the
		// reinvocation runs the limiter's Admit a second time.
		for _, name := range []string{"a", "b"} {
			if err := admit(name); err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
		}
		if err := admit("c"); !apierrors.IsTooManyRequests(err) {
			t.Fatalf("third create: %v, want 429", err)
		}
	})

	t.Run("no Initializer", func(t *testing.T) {
		_, err := plugins.NewFromPlugins([]string{PluginName}, configs{}, admission.PluginInitializers{}, nil)
		if err == nil || !strings.Contains(err.Error(), "has no limits") {
			t.Fatalf("got %v, want the missing limits refused", err)
		}
	})

	t.Run("a configuration file's entry", func(t *testing.T) {
		init := NewInitializer(Config{MaxReporters: 10})
		_, err := plugins.NewFromPlugins([]string{PluginName}, configs{PluginName: "kind: Configuration"}, init, nil)
		if err == nil || !strings.Contains(err.Error(), "--event-rate-limit-*") {
			t.Fatalf("got %v, want the configuration refused, naming the flags", err)
		}
	})

	t.Run("disabled", func(t *testing.T) {
		init := NewInitializer(Config{MaxReporters: 10})
		if _, err := plugins.NewFromPlugins([]string{"AskReinvocation"}, configs{}, init, nil); err != nil {
			t.Fatal(err)
		}
		if init.Plugin() != nil {
			t.Errorf("the Initializer holds a plugin the chain left out")
		}
	})
}
