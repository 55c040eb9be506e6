package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
)

// TestContradictoryFlags: each mode accepts its own flags, and every
// combination that contradicts the mode or another flag, or that the mode
// would silently ignore, is refused by an error naming the flags on both
// sides.
func TestContradictoryFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const etcd = "--etcd-servers=https://127.0.0.1:2379"
	kube := "--kubeconfig=" + kubeconfig
	for _, tc := range []struct {
		name string
		args []string
		mode apiserver.Mode
		// want are what the error must name; none: no error.
		want []string
	}{
		{name: "standalone, embedded etcd", args: []string{"--embedded-etcd-client-address=127.0.0.1:0"}},
		{name: "standalone, external etcd", args: []string{etcd, "--etcd-cafile=/ca", "--etcd-certfile=/c", "--etcd-keyfile=/k"}},
		{name: "standalone, storm limiter off", args: []string{"--disable-admission-plugins=" + storm.PluginName}},
		{name: "standalone, certificate files", args: []string{"--tls-cert-file=/c", "--tls-private-key-file=/k"}},
		{name: "standalone, self-signed certificate", args: []string{"--self-signed-cert-dns-names=a.b.svc", "--self-signed-cert-validity=2h"}},
		{name: "aggregated", mode: apiserver.Aggregated, args: []string{"--aggregated", etcd, kube,
			"--enable-admission-plugins=" + storm.PluginName, "--disable-admission-plugins=NamespaceLifecycle",
			"--admission-control-config-file=/a", "--enable-priority-and-fairness=true",
			"--self-signed-cert-dns-names=a.b.svc", "--event-rate-limit-qps=5", "--event-ttl=5m"}},
		{name: "aggregated, shared certificate", mode: apiserver.Aggregated, args: []string{"--aggregated", etcd,
			"--serving-cert-secret=ns/s", "--serving-cert-validity=1h", "--apiservice-names=v1.events.k8s.io"}},
		{name: "history-only", mode: apiserver.HistoryOnly, args: []string{"--history-only", kube,
			"--history=true", "--history-store=postgres", "--history-dsn=postgres://h/db", "--serving-cert-secret=ns/s",
			"--enable-priority-and-fairness=false", "--history-capture-behind-timeout=1m"}},

		{name: "history-only and aggregated", mode: apiserver.HistoryOnly,
			args: []string{"--history-only", "--aggregated", etcd},
			want: []string{"--history-only and --aggregated"}},
		{name: "history-only without history", mode: apiserver.HistoryOnly,
			args: []string{"--history-only", "--history=false"},
			want: []string{"--history-only and --history=false"}},
		{name: "history-only and etcd", mode: apiserver.HistoryOnly,
			args: []string{"--history-only", etcd, "--watch-cache=false", "--embedded-etcd-client-address=127.0.0.1:0"},
			want: []string{"--etcd-servers", "--watch-cache", "--embedded-etcd-client-address", "--history-only"}},
		{name: "history-only and the Events API", mode: apiserver.HistoryOnly,
			args: []string{"--history-only", "--event-ttl=5m", "--event-ttl-rule=type=Warning:1h", "--event-rate-limit-qps=5", "--max-event-bytes=1000"},
			want: []string{"--event-ttl", "--event-ttl-rule", "--event-rate-limit-qps", "--max-event-bytes", "--history-only"}},
		{name: "history-only and admission", mode: apiserver.HistoryOnly,
			args: []string{"--history-only", "--enable-admission-plugins=NamespaceLifecycle", "--disable-admission-plugins=" + storm.PluginName, "--admission-control-config-file=/a"},
			want: []string{"--enable-admission-plugins", "--disable-admission-plugins", "--admission-control-config-file", "--history-only"}},
		{name: "history-only and priority and fairness", mode: apiserver.HistoryOnly,
			args: []string{"--history-only", "--enable-priority-and-fairness"},
			want: []string{"--enable-priority-and-fairness", "--history-only"}},

		{name: "aggregated on the embedded etcd", mode: apiserver.Aggregated,
			args: []string{"--aggregated"},
			want: []string{"--aggregated needs --etcd-servers", "--data-dir"}},
		{name: "aggregated and the embedded etcd's flags", mode: apiserver.Aggregated,
			args: []string{"--aggregated", etcd, "--embedded-etcd-quota-backend-bytes=1000"},
			want: []string{"--embedded-etcd-quota-backend-bytes", "--etcd-servers"}},
		{name: "aggregated and capture through kube-apiserver", mode: apiserver.Aggregated,
			args: []string{"--aggregated", etcd, "--history-capture-behind-timeout=1m"},
			want: []string{"--history-capture-behind-timeout", "--history-only"}},

		{name: "standalone and delegation", args: []string{kube, "--requestheader-client-ca-file=/ca", "--authorization-always-allow-paths=/x"},
			want: []string{"--kubeconfig", "--requestheader-client-ca-file", "--authorization-always-allow-paths", "--aggregated"}},
		{name: "standalone and the shared certificate", args: []string{"--serving-cert-secret=ns/s", "--serving-cert-validity=1h"},
			want: []string{"--serving-cert-secret", "--serving-cert-validity", "--aggregated"}},
		{name: "standalone and priority and fairness", args: []string{"--enable-priority-and-fairness"},
			want: []string{"--enable-priority-and-fairness", "--aggregated"}},
		{name: "standalone and kube's admission plugins", args: []string{"--enable-admission-plugins=NamespaceLifecycle,ValidatingAdmissionWebhook"},
			want: []string{"--enable-admission-plugins=NamespaceLifecycle needs --aggregated", "--enable-admission-plugins=ValidatingAdmissionWebhook needs --aggregated"}},
		{name: "standalone and disabling a plugin it never runs", args: []string{"--disable-admission-plugins=MutatingAdmissionWebhook"},
			want: []string{"--disable-admission-plugins=MutatingAdmissionWebhook does nothing without --aggregated"}},
		{name: "standalone and an admission configuration", args: []string{"--admission-control-config-file=/a"},
			want: []string{"--admission-control-config-file applies only with --aggregated"}},
		{name: "external etcd and the embedded etcd's flags", args: []string{etcd, "--embedded-etcd-client-address=0.0.0.0:2379", "--embedded-etcd-progress-notify-interval=1s"},
			want: []string{"--embedded-etcd-client-address", "--embedded-etcd-progress-notify-interval", "--etcd-servers"}},
		{name: "embedded etcd and TLS", args: []string{"--etcd-cafile=/ca", "--etcd-certfile=/c", "--etcd-keyfile=/k"},
			want: []string{"--etcd-cafile, --etcd-certfile and --etcd-keyfile apply only with --etcd-servers"}},
		{name: "standalone and capture through kube-apiserver", args: []string{"--history-capture-behind-timeout=1m"},
			want: []string{"--history-capture-behind-timeout", "--history-only"}},

		{name: "shared certificate's tuning without its Secret", mode: apiserver.Aggregated,
			args: []string{"--aggregated", etcd, "--serving-cert-validity=1h", "--apiservice-names=x"},
			want: []string{"--apiservice-names and --serving-cert-validity apply only with --serving-cert-secret"}},
		{name: "shared certificate's tuning without its Secret, history-only", mode: apiserver.HistoryOnly,
			args: []string{"--history-only", "--serving-cert-renew-fraction=0.5"},
			want: []string{"--serving-cert-renew-fraction applies only with --serving-cert-secret"}},
		{name: "shared certificate and files", mode: apiserver.Aggregated,
			args: []string{"--aggregated", etcd, "--serving-cert-secret=ns/s", "--tls-cert-file=/c", "--tls-private-key-file=/k"},
			want: []string{"--serving-cert-secret and --tls-cert-file/--tls-private-key-file are two sources"}},
		{name: "self-signed certificate's flags and files", args: []string{"--tls-cert-file=/c", "--tls-private-key-file=/k", "--self-signed-cert-validity=2h"},
			want: []string{"--self-signed-cert-validity", "--tls-cert-file"}},
		{name: "self-signed certificate's flags and the shared one", mode: apiserver.HistoryOnly,
			args: []string{"--history-only", "--serving-cert-secret=ns/s", "--self-signed-cert-dns-names=a.b.svc"},
			want: []string{"--self-signed-cert-dns-names", "--serving-cert-secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := complete(t, tc.args...)
			if c.mode != tc.mode {
				t.Errorf("mode %s, want %s", c.mode, tc.mode)
			}
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error naming %q", tc.want)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// TestEveryIgnoredFlagRefused sets, one at a time, every flag of the flag
// sets a mode has no use for, and wants it named: a flag added to such a
// set later is refused without a new rule.
func TestEveryIgnoredFlagRefused(t *testing.T) {
	const etcd = "--etcd-servers=https://127.0.0.1:2379"
	for _, tc := range []struct {
		mode string
		args []string
		sets []string
		// but are flags of those sets the mode does use.
		but []string
	}{
		{mode: "history-only", args: []string{"--history-only"}, sets: []string{"etcd", "embedded etcd", "event storms", "admission"}},
		{mode: "standalone", sets: []string{"aggregated"}, but: []string{"aggregated"}},
		{mode: "external etcd", args: []string{etcd}, sets: []string{"embedded etcd"}},
		{mode: "aggregated", args: []string{"--aggregated", etcd}, sets: []string{"embedded etcd"}},
	} {
		for _, set := range tc.sets {
			all := NewOptions().commandFlags()
			all.FlagSet(set).VisitAll(func(f *pflag.Flag) {
				if slices.Contains(tc.but, f.Name) || slices.ContainsFunc(tc.args, func(a string) bool { return strings.HasPrefix(a, "--"+f.Name+"=") }) {
					return
				}
				t.Run(tc.mode+"/--"+f.Name, func(t *testing.T) {
					o := NewOptions()
					fss := o.commandFlags()
					fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
					for _, s := range fss.FlagSets {
						fs.AddFlagSet(s)
					}
					if err := fs.Parse(append([]string{"--data-dir=" + t.TempDir()}, tc.args...)); err != nil {
						t.Fatal(err)
					}
					// Its default, given: set, whatever the value.
					if err := fs.Set(f.Name, strings.Trim(f.DefValue, "[]")); err != nil {
						t.Fatal(err)
					}
					c, err := o.Complete(fss)
					if err == nil {
						err = c.Validate()
					}
					if err == nil || !strings.Contains(err.Error(), "--"+f.Name) {
						t.Errorf("--%s with %v: %v, want it refused by name", f.Name, tc.args, err)
					}
				})
			})
		}
	}
}
