package eventmetrics

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Options are the flags of event_apiserver_events_total.
type Options struct {
	MaxSeries int
	Reasons   []string
	// Namespaces are regarding objects' namespaces.
	Namespaces []string
	// Kinds are regarding objects' kinds.
	Kinds []string
}

func NewOptions() *Options {
	return &Options{MaxSeries: DefaultMaxSeries}
}

func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.MaxSeries, "event-metrics-max-series", o.MaxSeries,
		"Most series of event_apiserver_events_total, the Events counted by source, type, reason, regarding kind "+
			"and regarding namespace. A new combination past it is counted with reason, kind and namespace _other "+
			"(event_apiserver_events_folded_total counts those); series unchanged for an hour give their room back. "+
			fmt.Sprintf("0 turns the metric off; otherwise at least %d.", MinMaxSeries))
	fs.StringSliceVar(&o.Reasons, "event-metrics-reasons", o.Reasons,
		"Reasons that get series of their own in event_apiserver_events_total; others are counted as _other. "+
			"Empty (the default): every reason, up to --event-metrics-max-series.")
	fs.StringSliceVar(&o.Namespaces, "event-metrics-namespaces", o.Namespaces,
		"Namespaces (of the Events' regarding objects) that get series of their own in event_apiserver_events_total; "+
			"others are counted as _other, cluster-scoped objects as the empty namespace. Empty (the default): every "+
			"namespace, up to --event-metrics-max-series.")
	fs.StringSliceVar(&o.Kinds, "event-metrics-kinds", o.Kinds,
		"Kinds of the Events' regarding objects that get series of their own in event_apiserver_events_total; "+
			"others are counted as _other. Empty (the default): every kind, up to --event-metrics-max-series.")
}

func (o *Options) Validate() []error {
	var errs []error
	if o.MaxSeries != 0 && o.MaxSeries < MinMaxSeries {
		errs = append(errs, fmt.Errorf("--event-metrics-max-series must be 0 (off) or at least %d", MinMaxSeries))
	}
	for _, list := range []struct {
		flag   string
		values []string
	}{{"event-metrics-reasons", o.Reasons}, {"event-metrics-namespaces", o.Namespaces}, {"event-metrics-kinds", o.Kinds}} {
		for _, v := range list.values {
			if v == "" {
				errs = append(errs, fmt.Errorf("--%s lists an empty value: empty values always count as themselves", list.flag))
			} else if v == Other {
				errs = append(errs, fmt.Errorf("--%s lists %s, the value of everything it leaves out", list.flag, Other))
			}
		}
	}
	return errs
}

// Counter is the Counter the flags describe, nil when the metric is off.
func (o *Options) Counter() *Counter {
	if o.MaxSeries == 0 {
		return nil
	}
	return New(Config{MaxSeries: o.MaxSeries, Reasons: o.Reasons, Namespaces: o.Namespaces, Kinds: o.Kinds})
}
