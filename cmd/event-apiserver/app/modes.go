package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
)

// The server runs in one of three modes (apiserver.Mode), decided once from
// --history-only and --aggregated; where a standalone server's etcd runs is
// a property of the mode (completedOptions.embeddedEtcd), not a mode. What
// differs between modes asks the mode, and flagErrors is the one place that
// refuses flags which contradict the mode or each other, or which the mode
// would silently ignore: an ignored flag hides a mistake, such as a
// forgotten --aggregated.

// modeOf decides the mode. Given both --history-only and --aggregated it
// says history-only, and flagErrors refuses the pair.
func modeOf(o *Options) apiserver.Mode {
	switch {
	case o.History.Only:
		return apiserver.HistoryOnly
	case o.Aggregated.Enabled:
		return apiserver.Aggregated
	}
	return apiserver.Standalone
}

// setFlags are the flags given on the command line, by name and by the
// named flag set (--help's section) they belong to.
type setFlags struct {
	byName map[string]*pflag.Flag
	bySet  map[string][]string
}

func setFlagsOf(fss cliflag.NamedFlagSets) setFlags {
	s := setFlags{byName: map[string]*pflag.Flag{}, bySet: map[string][]string{}}
	for _, set := range fss.Order {
		fss.FlagSets[set].VisitAll(func(f *pflag.Flag) {
			if f.Changed {
				s.byName[f.Name] = f
				s.bySet[set] = append(s.bySet[set], f.Name)
			}
		})
	}
	return s
}

func (s setFlags) has(name string) bool { return s.byName[name] != nil }

// value is a given flag's value, "" when not given.
func (s setFlags) value(name string) string {
	if f := s.byName[name]; f != nil {
		return f.Value.String()
	}
	return ""
}

// of lists, as --name and in order, the given flags among names and among
// the flag sets called sets.
func (s setFlags) of(names []string, sets ...string) []string {
	var given []string
	for _, name := range names {
		if s.has(name) {
			given = append(given, "--"+name)
		}
	}
	for _, set := range sets {
		for _, name := range s.bySet[set] {
			given = append(given, "--"+name)
		}
	}
	return given
}

// refuse is the error naming flags, followed by verb, made singular for one
// flag ("apply" becomes "applies"), and why.
func refuse(flags []string, verb, why string, args ...any) error {
	if len(flags) == 1 {
		switch verb {
		case "apply":
			verb = "applies"
		case "do":
			verb = "does"
		}
	}
	return fmt.Errorf("%s %s %s", list(flags), verb, fmt.Sprintf(why, args...))
}

// list joins names as a sentence does: "a", "a and b", "a, b and c".
func list(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Flags that belong to one concern and mean nothing elsewhere.
var (
	// eventFlags are the Events API's, beside the "etcd", "embedded
	// etcd", "event storms" and "admission" flag sets.
	eventFlags = []string{"event-ttl", "event-ttl-rule", "event-ttl-backstop-interval", "event-ttl-backstop-qps"}
	// etcdTLSFlags reach an external etcd; the embedded one is reached
	// without TLS, through a socket in --data-dir or on loopback.
	etcdTLSFlags = []string{"etcd-cafile", "etcd-certfile", "etcd-keyfile"}
	// selfSignedFlags shape the certificate made when none is given.
	selfSignedFlags = []string{"self-signed-cert-dns-names", "self-signed-cert-validity"}
	// historyOnlyFlags tune capture through kube-apiserver's API.
	historyOnlyFlags = []string{"history-capture-behind-timeout",
		"history-fleet-namespace", "history-fleet-max-members", "history-fleet-member-queue-bytes"}
	certFileFlags = []string{"tls-cert-file", "tls-private-key-file"}
)

// flagErrors refuses contradictory flags, each error naming the flags on
// both sides.
func (c *completedOptions) flagErrors() []error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	set := c.set
	pf := []string(nil)
	if set.value("enable-priority-and-fairness") == "true" {
		pf = []string{"--enable-priority-and-fairness"}
	}

	switch c.mode {
	case apiserver.HistoryOnly:
		if set.has("aggregated") {
			add(errors.New("--history-only and --aggregated are two modes: give one (--history-only serves history alone; " +
				"--aggregated serves the Events API behind kube-apiserver)"))
		}
		// --history=true says what --history-only implies, and is what
		// components/history-postgres appends to whichever overlay it
		// joins; only its opposite contradicts the mode.
		if set.has("history") && set.value("history") != "true" {
			add(fmt.Errorf("--history-only and --history=%s: a history-only server always keeps history; drop --history", set.value("history")))
		}
		if given := set.of(eventFlags, "etcd", "embedded etcd", "event storms", "admission"); len(given) > 0 {
			add(refuse(given, "would", "do nothing with --history-only: it serves no Events and uses no etcd"))
		}
		if len(pf) > 0 {
			add(refuse(pf, "would", "do nothing with --history-only: its configuration would need more RBAC; the max-in-flight limits apply"))
		}
	case apiserver.Aggregated:
		if c.embeddedEtcd {
			// Replicas behind an APIService would each keep their own
			// Events, and a pod restart would lose them all.
			add(errors.New("--aggregated needs --etcd-servers: --data-dir's embedded etcd is for a single standalone server " +
				"and kube-apiserver cannot reach it"))
		}
	case apiserver.Standalone:
		given := slices.DeleteFunc(set.of(nil, "aggregated"), func(f string) bool { return f == "--aggregated" })
		if len(given) > 0 {
			add(refuse(given, "apply", "only with --aggregated or --history-only (which delegate to kube-apiserver): "+
				"a standalone server has its own admin token"))
		}
		if len(pf) > 0 {
			add(refuse(pf, "apply", "only with --aggregated: its configuration lives in kube-apiserver; "+
				"a standalone server has the max-in-flight limits"))
		}
		errs = append(errs, c.standaloneAdmissionErrors()...)
	}

	if c.mode.ServesEvents() && !c.embeddedEtcd {
		if given := set.of(nil, "embedded etcd"); len(given) > 0 {
			add(refuse(given, "apply", "only to the embedded etcd: --etcd-servers replaces it"))
		}
	}
	if c.mode.ServesEvents() && c.embeddedEtcd {
		if given := set.of(etcdTLSFlags); len(given) > 0 {
			add(refuse(given, "apply", "only with --etcd-servers: --data-dir's embedded etcd is reached without TLS"))
		}
	}
	if c.mode != apiserver.HistoryOnly {
		if given := set.of(historyOnlyFlags); len(given) > 0 {
			add(refuse(given, "apply", "only with --history-only: it tunes capture through kube-apiserver's API"))
		}
	}

	// The serving certificate: one of --tls-cert-file, --serving-cert-secret
	// (behind kube-apiserver) or the self-signed one.
	certFiles := set.of(certFileFlags)
	if c.mode.Delegates() {
		if !c.sharedCert() {
			if given := set.of(servingcert.DependentFlags); len(given) > 0 {
				add(refuse(given, "apply", "only with --serving-cert-secret"))
			}
		} else if len(certFiles) > 0 {
			add(fmt.Errorf("--serving-cert-secret and %s are two sources of the serving certificate: give one", strings.Join(certFiles, "/")))
		}
	}
	if given := set.of(selfSignedFlags); len(given) > 0 {
		switch {
		case c.sharedCert():
			add(refuse(given, "apply", "only to the self-signed certificate: --serving-cert-secret replaces it"))
		case !c.selfSignedCert():
			add(refuse(given, "apply", "only to the self-signed certificate: %s replaces it", strings.Join(certFiles, "/")))
		}
	}
	return errs
}
