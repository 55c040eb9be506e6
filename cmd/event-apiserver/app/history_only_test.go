package app

import (
	"reflect"
	"testing"

	"github.com/spf13/pflag"
)

func TestHistoryOnlyRefusedFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{name: "delegation and store", args: []string{"--history-only", "--kubeconfig=/k", "--history-store=postgres",
			"--history-dsn=postgres://h/db", "--serving-cert-secret=ns/s", "--enable-priority-and-fairness=false"}},
		{name: "etcd", args: []string{"--history-only", "--etcd-servers=https://e:2379", "--watch-cache=false",
			"--embedded-etcd-client-address=127.0.0.1:0"},
			want: []string{"--etcd-servers", "--watch-cache", "--embedded-etcd-client-address"}},
		{name: "the Events API", args: []string{"--history-only", "--event-ttl=5m", "--event-ttl-rule=type=Warning:1h",
			"--event-rate-limit-qps=5", "--enable-admission-plugins=NamespaceLifecycle", "--aggregated", "--history=false",
			"--enable-priority-and-fairness"},
			want: []string{"--event-rate-limit-qps", "--enable-admission-plugins", "--event-ttl", "--event-ttl-rule",
				"--aggregated", "--history", "--enable-priority-and-fairness"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			flagSets := NewOptions().Flags()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			for _, f := range flagSets.FlagSets {
				fs.AddFlagSet(f)
			}
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := historyOnlyRefusedFlags(flagSets); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHistoryOnlyValidates: a history-only server needs no etcd, and the
// delegation of --aggregated is on.
func TestHistoryOnlyValidates(t *testing.T) {
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, f := range o.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse([]string{"--history-only", "--data-dir=" + t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if !o.Aggregated.Enabled || o.Features.EnablePriorityAndFairness {
		t.Errorf("history-only: delegated %v, priority and fairness %v; want delegated without it",
			o.Aggregated.Enabled, o.Features.EnablePriorityAndFairness)
	}
}
