package storm

import (
	"fmt"
	"io"

	"k8s.io/apiserver/pkg/admission"
)

// PluginName is the limiter's name in --enable-admission-plugins and
// --disable-admission-plugins and in the admission metrics' name label. It
// is not kube-apiserver's EventRateLimit, which is another plugin: limits of
// type Server, Namespace, User and SourceAndObject read from
// --admission-control-config-file, answered 429 without Retry-After. Under
// that name a kube-apiserver manifest's flags, carried over, would run this
// plugin with their configuration refused, and the two servers' admission
// metrics would mix two plugins under one name.
const PluginName = "EventStormLimit"

// Register registers the plugin, as sample-apiserver registers BanFlunder.
// Its limits are flags (--event-rate-limit-*, --max-event-bytes), not an
// admission configuration file: the admission chain gets them from an
// Initializer, and a configuration for the plugin is refused rather than
// ignored.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(config io.Reader) (admission.Interface, error) {
		if config != nil {
			return nil, fmt.Errorf("%s takes no configuration from --admission-control-config-file: its limits are the --event-rate-limit-* and --max-event-bytes flags", PluginName)
		}
		return newUnconfigured(), nil
	})
}

// Initializer gives the plugin its limits, and keeps the plugin it gave them
// to: the handler chain's early refusal (WithEarlyRefusal) must consult the
// very limiter the admission chain charges.
type Initializer struct {
	config Config
	plugin *Plugin
}

var _ admission.PluginInitializer = &Initializer{}

func NewInitializer(c Config) *Initializer {
	return &Initializer{config: c}
}

func (i *Initializer) Initialize(p admission.Interface) {
	if plugin, ok := p.(*Plugin); ok {
		plugin.configure(i.config)
		i.plugin = plugin
	}
}

// Plugin is the plugin the admission chain holds; nil when
// --disable-admission-plugins left it out.
func (i *Initializer) Plugin() *Plugin { return i.plugin }

var _ admission.InitializationValidator = &Plugin{}

// ValidateInitialization refuses a plugin no Initializer configured, which
// would admit every write unlimited.
func (p *Plugin) ValidateInitialization() error {
	if p.limiter == nil {
		return fmt.Errorf("%s has no limits: its storm.Initializer is missing from the admission chain", PluginName)
	}
	return nil
}
