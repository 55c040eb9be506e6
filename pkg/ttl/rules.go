package ttl

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// MaxRules bounds the rules, and with them the TTL classes: each distinct TTL
// holds one etcd3 store and, while Events of that class are written, one
// live lease per reuse window.
const MaxRules = 16

// The keys a rule matches on.
const (
	keyType                = "type"
	keyReason              = "reason"
	keyReportingController = "reportingController"
)

// Rule gives Events that match every set field a TTL. An empty field
// matches anything.
type Rule struct {
	Type   string
	Reason string
	// ReportingController matches events.k8s.io/v1's reportingController,
	// or, for Events of old core/v1 recorders that set none, the source
	// component, as the field selector "source" does.
	ReportingController string
	TTL                 time.Duration
}

// Rules choose an Event's TTL: the first rule that matches, else Default.
type Rules struct {
	rules []Rule
	// Default is --event-ttl; zero keeps Events forever.
	Default time.Duration
}

// Parse reads rules in the syntax of --event-ttl-rule, in order:
// "KEY=VALUE[,KEY=VALUE...]:DURATION", keys type, reason and
// reportingController.
func Parse(specs []string, defaultTTL time.Duration) (*Rules, error) {
	if len(specs) > MaxRules {
		return nil, fmt.Errorf("--event-ttl-rule: %d rules given, at most %d are allowed", len(specs), MaxRules)
	}
	r := &Rules{Default: defaultTTL}
	for _, spec := range specs {
		rule, err := parseRule(spec)
		if err != nil {
			return nil, fmt.Errorf("--event-ttl-rule %q: %w", spec, err)
		}
		for j, earlier := range r.rules {
			if earlier.matcher() == rule.matcher() {
				return nil, fmt.Errorf("--event-ttl-rule %q: never applies, rule %d (%q) matches the same Events first", spec, j+1, specs[j])
			}
		}
		r.rules = append(r.rules, rule)
	}
	return r, nil
}

func parseRule(spec string) (Rule, error) {
	// The last colon: durations never hold one, while a value might.
	at := strings.LastIndex(spec, ":")
	if at < 0 {
		return Rule{}, fmt.Errorf("want KEY=VALUE[,KEY=VALUE...]:DURATION, e.g. type=Warning:24h")
	}
	var rule Rule
	ttl, err := time.ParseDuration(spec[at+1:])
	if err != nil {
		return Rule{}, fmt.Errorf("bad duration %q: %w", spec[at+1:], err)
	}
	switch {
	case ttl < time.Second:
		return Rule{}, fmt.Errorf("TTL %s must be at least 1s (--event-ttl alone can keep Events forever)", ttl)
	case ttl%time.Second != 0:
		return Rule{}, fmt.Errorf("TTL %s must be whole seconds: etcd leases count whole seconds", ttl)
	}
	rule.TTL = ttl
	seen := map[string]bool{}
	for _, pair := range strings.Split(spec[:at], ",") {
		key, value, ok := strings.Cut(pair, "=")
		if !ok || key == "" {
			return Rule{}, fmt.Errorf("%q is not KEY=VALUE", pair)
		}
		if value == "" {
			return Rule{}, fmt.Errorf("%s has an empty value", key)
		}
		if seen[key] {
			return Rule{}, fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		switch key {
		case keyType:
			// Recorders of both APIs send only these two; a rule for
			// "warning" would silently never match.
			if value != "Normal" && value != "Warning" {
				return Rule{}, fmt.Errorf("type must be Normal or Warning, not %q", value)
			}
			rule.Type = value
		case keyReason:
			rule.Reason = value
		case keyReportingController:
			rule.ReportingController = value
		default:
			return Rule{}, fmt.Errorf("unknown key %q, want %s, %s or %s", key, keyType, keyReason, keyReportingController)
		}
	}
	return rule, nil
}

func (r Rule) matcher() Rule {
	r.TTL = 0
	return r
}

func (r Rule) matches(e *core.Event) bool {
	if r.Type != "" && r.Type != e.Type {
		return false
	}
	if r.Reason != "" && r.Reason != e.Reason {
		return false
	}
	if r.ReportingController != "" && r.ReportingController != reportingController(e) {
		return false
	}
	return true
}

// reportingController is what fieldselectors calls "source": old core/v1
// recorders name themselves only in source.component.
func reportingController(e *core.Event) string {
	if e.ReportingController != "" {
		return e.ReportingController
	}
	return e.Source.Component
}

// For returns the TTL of an Event.
func (r *Rules) For(e *core.Event) time.Duration {
	for _, rule := range r.rules {
		if rule.matches(e) {
			return rule.TTL
		}
	}
	return r.Default
}

// Seconds is For as the storage's TTL argument; an object that is not an
// Event gets the default.
func (r *Rules) Seconds(obj runtime.Object) uint64 {
	if e, ok := obj.(*core.Event); ok {
		return uint64(r.For(e).Seconds())
	}
	return uint64(r.Default.Seconds())
}

// TTLFunc is the registry Store's TTLFunc. kube-apiserver restarts the full
// TTL on every write, creates and updates alike; so does this, by the
// Event's rule, so a series update extends the Event by its own TTL.
func (r *Rules) TTLFunc(obj runtime.Object, _ uint64, _ bool) (uint64, error) {
	return r.Seconds(obj), nil
}

// Empty reports whether only --event-ttl applies.
func (r *Rules) Empty() bool {
	return len(r.rules) == 0
}

// Classes returns every TTL in use, in seconds, sorted, zero (no lease)
// left out.
func (r *Rules) Classes() []uint64 {
	var classes []uint64
	for _, ttl := range append([]time.Duration{r.Default}, ttlsOf(r.rules)...) {
		if s := uint64(ttl.Seconds()); s > 0 && !slices.Contains(classes, s) {
			classes = append(classes, s)
		}
	}
	slices.Sort(classes)
	return classes
}

func ttlsOf(rules []Rule) []time.Duration {
	ttls := make([]time.Duration, 0, len(rules))
	for _, r := range rules {
		ttls = append(ttls, r.TTL)
	}
	return ttls
}
