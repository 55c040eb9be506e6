package storm

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Defaults. They are set so that a healthy cluster never waits and a sick
// reporter cannot fill etcd:
//
//   - A kubelet is the busiest per-node reporter. Filling a node at once
//     (110 pods, the default --max-pods, each with Pulling, Pulled, Created
//     and Started for a container or two, plus sandbox Events) writes well
//     under 1000 Events, and its own client sends at most 50 a second
//     (eventRecordQPS 50, eventBurst 100). A burst of 1000 creates takes
//     all of that at full speed.
//   - In steady state a healthy reporter creates far less than one Event a
//     second; a sick one (crash-looping pods, a failing volume, a kubelet
//     restarting and forgetting its spam filter) creates up to its client
//     limit, 50 a second, forever: 180,000 Events an hour. 10 a second
//     refills the burst in 100 s and caps a sick reporter at a fifth of that.
//   - Repeats are patches (count, lastTimestamp, series); they do not add
//     keys to etcd, and counting them is what keeps a storm readable, so
//     updates get their own, larger budget: a reporter out of create tokens
//     still has its series counted.
//   - The global budget protects etcd when many reporters storm at once:
//     1000 writes a second is above a large healthy cluster's Event rate
//     (pod churn of 100 pods a second writes about that many) and well
//     within what one etcd takes.
//
// A reporter that must go faster (the scheduler of a very large cluster
// binding more than 10 pods a second for minutes) needs larger values.
const (
	DefaultCreateQPS   = 10
	DefaultCreateBurst = 1000
	DefaultUpdateQPS   = 20
	DefaultUpdateBurst = 2000
	DefaultGlobalQPS   = 1000
	DefaultGlobalBurst = 5000

	// The byte budgets keep the steady state inside etcd's default 2 GiB
	// quota (--embedded-etcd-quota-backend-bytes) for the default one-hour
	// --event-ttl. An Event stays in etcd for up to the TTL, plus the lease
	// manager's reuse window (60 s), plus up to one compaction interval
	// (300 s) for its old revisions: about 4,020 s. At the global rate that
	// is 256 KiB x 4,020 s + a 64 MiB burst = 1,069 MiB, half the quota;
	// the other half is bbolt's page overhead and the free pages that
	// accumulate between defragmentations. A reporter gets an eighth of
	// the global rate, and a burst of 8 MiB (eight maximal Events).
	// With a smaller quota or a longer TTL, scale DefaultGlobalBytesQPS by
	// quota / 2 GiB x 3,600 s / TTL.
	DefaultGlobalBytesQPS     = 256 << 10
	DefaultGlobalBytesBurst   = 64 << 20
	DefaultReporterBytesQPS   = 32 << 10
	DefaultReporterBytesBurst = 8 << 20

	// Each authenticated user's budget, all its reporters together, so that
	// a client rotating reportingInstance or source.host mints no fresh
	// bursts. kube-controller-manager is one user for a few dozen
	// controllers and the busiest legitimate one: 100 writes a second and a
	// burst of 5,000 (the global burst) cover a large rollout. Kubelets and
	// schedulers each have their own user.
	DefaultUserQPS      = 100
	DefaultUserBurst    = 5000
	DefaultMaxReporters = 10000
)

// Options are the storm limiter's flags.
type Options struct {
	CreateQPS   float64
	CreateBurst int
	UpdateQPS   float64
	UpdateBurst int
	GlobalQPS   float64
	GlobalBurst int
	// Byte budgets: bytes a second and burst in bytes, of stored size.
	GlobalBytesQPS     float64
	GlobalBytesBurst   int
	ReporterBytesQPS   float64
	ReporterBytesBurst int
	UserQPS            float64
	UserBurst          int
	MaxReporters       int
	MaxEventBytes      int64
}

func NewOptions() *Options {
	return &Options{
		CreateQPS:   DefaultCreateQPS,
		CreateBurst: DefaultCreateBurst,
		UpdateQPS:   DefaultUpdateQPS,
		UpdateBurst: DefaultUpdateBurst,
		GlobalQPS:   DefaultGlobalQPS,
		GlobalBurst: DefaultGlobalBurst,

		GlobalBytesQPS:     DefaultGlobalBytesQPS,
		GlobalBytesBurst:   DefaultGlobalBytesBurst,
		ReporterBytesQPS:   DefaultReporterBytesQPS,
		ReporterBytesBurst: DefaultReporterBytesBurst,
		UserQPS:            DefaultUserQPS,
		UserBurst:          DefaultUserBurst,
		MaxReporters:       DefaultMaxReporters,
		MaxEventBytes:      DefaultMaxEventBytes,
	}
}

func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&o.CreateQPS, "event-rate-limit-qps", o.CreateQPS,
		"Event creates a second each reporter may make on average (reporter: reportingController and "+
			"reportingInstance, else source component and host). Over it, creates get 429 with Retry-After. "+
			"0 disables the limit.")
	fs.IntVar(&o.CreateBurst, "event-rate-limit-burst", o.CreateBurst,
		"Event creates a reporter may make at once before --event-rate-limit-qps applies.")
	fs.Float64Var(&o.UpdateQPS, "event-rate-limit-update-qps", o.UpdateQPS,
		"Updates and patches of existing Events (repeats, series) a second each reporter may make on "+
			"average, counted apart from creates so that series keep counting. 0 disables the limit.")
	fs.IntVar(&o.UpdateBurst, "event-rate-limit-update-burst", o.UpdateBurst,
		"Event updates and patches a reporter may make at once before --event-rate-limit-update-qps applies.")
	fs.Float64Var(&o.GlobalQPS, "event-rate-limit-global-qps", o.GlobalQPS,
		"Event writes (creates, updates, patches) a second the whole server accepts on average, "+
			"whoever the reporter, to protect etcd. 0 disables the limit.")
	fs.IntVar(&o.GlobalBurst, "event-rate-limit-global-burst", o.GlobalBurst,
		"Event writes the whole server accepts at once before --event-rate-limit-global-qps applies.")
	fs.IntVar(&o.MaxReporters, "event-rate-limit-max-reporters", o.MaxReporters,
		"Reporters whose budgets are remembered at once. Idle reporters are forgotten once their "+
			"budgets are full again; beyond this many, the least recently seen are forgotten first.")
	fs.Float64Var(&o.GlobalBytesQPS, "event-rate-limit-global-bytes-qps", o.GlobalBytesQPS,
		"Bytes of Events (stored size) all writes together may add a second, so that the steady state stays "+
			"inside etcd's quota within one --event-ttl (see docs/operations.md for the arithmetic). 0 disables it.")
	fs.IntVar(&o.GlobalBytesBurst, "event-rate-limit-global-bytes-burst", o.GlobalBytesBurst,
		"Bytes of Events all writes together may add at once.")
	fs.Float64Var(&o.ReporterBytesQPS, "event-rate-limit-bytes-qps", o.ReporterBytesQPS,
		"Bytes of Events (stored size) each reporter may add a second. 0 disables it.")
	fs.IntVar(&o.ReporterBytesBurst, "event-rate-limit-bytes-burst", o.ReporterBytesBurst,
		"Bytes of Events each reporter may add at once.")
	fs.Float64Var(&o.UserQPS, "event-rate-limit-user-qps", o.UserQPS,
		"Event writes a second each authenticated user may make, all its reporters together, so that "+
			"inventing reporter names gains nothing. 0 disables it.")
	fs.IntVar(&o.UserBurst, "event-rate-limit-user-burst", o.UserBurst,
		"Event writes each authenticated user may make at once.")
	fs.Int64Var(&o.MaxEventBytes, "max-event-bytes", o.MaxEventBytes,
		"Largest Event accepted, measured as stored in etcd (core/v1 protobuf); larger creates and "+
			"updates get 413. Keep it under etcd's --max-request-bytes (1.5 MiB by default). 0 disables the limit.")
}

func (o *Options) Validate() []error {
	var errs []error
	check := func(name string, qps float64, burst int) {
		if qps < 0 {
			errs = append(errs, fmt.Errorf("--%s-qps must not be negative", name))
		}
		if qps > 0 && burst < 1 {
			errs = append(errs, fmt.Errorf("--%s-burst must be at least 1 when --%s-qps is set", name, name))
		}
	}
	check("event-rate-limit", o.CreateQPS, o.CreateBurst)
	check("event-rate-limit-update", o.UpdateQPS, o.UpdateBurst)
	check("event-rate-limit-global", o.GlobalQPS, o.GlobalBurst)
	check("event-rate-limit-global-bytes", o.GlobalBytesQPS, o.GlobalBytesBurst)
	check("event-rate-limit-bytes", o.ReporterBytesQPS, o.ReporterBytesBurst)
	check("event-rate-limit-user", o.UserQPS, o.UserBurst)
	if o.MaxReporters < 1 {
		errs = append(errs, fmt.Errorf("--event-rate-limit-max-reporters must be at least 1"))
	}
	if o.MaxEventBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-event-bytes must not be negative"))
	}
	return errs
}

// Config is the plugin configuration the flags describe.
func (o *Options) Config() Config {
	return Config{
		Create:        Limit{QPS: o.CreateQPS, Burst: o.CreateBurst},
		Update:        Limit{QPS: o.UpdateQPS, Burst: o.UpdateBurst},
		Global:        Limit{QPS: o.GlobalQPS, Burst: o.GlobalBurst},
		GlobalBytes:   Limit{QPS: o.GlobalBytesQPS, Burst: o.GlobalBytesBurst},
		ReporterBytes: Limit{QPS: o.ReporterBytesQPS, Burst: o.ReporterBytesBurst},
		User:          Limit{QPS: o.UserQPS, Burst: o.UserBurst},
		MaxReporters:  o.MaxReporters,
		MaxEventBytes: o.MaxEventBytes,
	}
}
