package expiry

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/eventapiserver/event-apiserver/pkg/ttl"
)

// Options are the backstop's flags.
type Options struct {
	// Interval is --event-ttl-backstop-interval; zero turns the backstop
	// off.
	Interval time.Duration
	// QPS is --event-ttl-backstop-qps.
	QPS float32
}

// NewOptions returns the defaults: a pass every 10s, so that an Event etcd
// failed to expire goes at most about 20s (a pass interval and a clock
// sample) and TTL/64 after its TTL and slack, at no cost while nothing
// comes due (a pass that finds its classes' due revisions unmoved reads
// nothing); and 100 deletes a second, so that a backlog drains in the
// background (etcd's own lessor revokes up to 1000 leases a second, each of
// up to 1000 Events).
func NewOptions() *Options {
	return &Options{Interval: 10 * time.Second, QPS: 100}
}

func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.Interval, "event-ttl-backstop-interval", o.Interval,
		"How often the server looks for Events still in etcd past their TTL (--event-ttl or their --event-ttl-rule) and "+
			"its lease reuse slack, and deletes them: etcd renews every lease to its full TTL on each leader change and "+
			"each restart of a one-member etcd, so where those come more often than the TTL, its leases never expire. "+
			"Each such Event goes at most this interval, plus the revision clock's sample period (10s, or this interval if "+
			"shorter) and 1/64 of its TTL, after its deadline; never before it, as long as the replicas' clocks agree. "+
			"Needs the watch cache. 0 turns the backstop off.")
	fs.Float32Var(&o.QPS, "event-ttl-backstop-qps", o.QPS,
		"Most Events the TTL backstop deletes a second, so that a backlog (after etcd kept Events through many "+
			"leader changes) drains without flooding etcd.")
}

func (o *Options) Validate() []error {
	var errs []error
	if o.Interval < 0 {
		errs = append(errs, fmt.Errorf("--event-ttl-backstop-interval must not be negative (0 turns the backstop off)"))
	} else if o.Interval > 0 && o.Interval < time.Second {
		errs = append(errs, fmt.Errorf("--event-ttl-backstop-interval must be at least 1s (0 turns the backstop off)"))
	}
	if o.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--event-ttl-backstop-qps must be positive"))
	}
	return errs
}

// Config is the backstop's configuration for rules.
func (o *Options) Config(rules *ttl.Rules) Config {
	return Config{Rules: rules, Interval: o.Interval, QPS: o.QPS}
}
