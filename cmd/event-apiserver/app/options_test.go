package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/version"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"
)

// TestValidate pins the combinations of flags refused at start-up, before
// anything is started.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "aggregated with external etcd", args: []string{"--aggregated", "--etcd-servers=http://127.0.0.1:2379"}},
		{name: "embedded etcd on loopback", args: []string{"--embedded-etcd-client-address=127.0.0.1:2379"}},
		{name: "embedded etcd on IPv6 loopback", args: []string{"--embedded-etcd-client-address=[::1]:0"}},
		{name: "embedded etcd on localhost", args: []string{"--embedded-etcd-client-address=localhost:0"}},
		{name: "embedded etcd on all addresses", args: []string{"--embedded-etcd-client-address=0.0.0.0:2379"},
			wantErr: "must be a loopback address"},
		{name: "embedded etcd on a routable address", args: []string{"--embedded-etcd-client-address=10.0.0.1:2379"},
			wantErr: "must be a loopback address"},
		{name: "embedded etcd on a host name", args: []string{"--embedded-etcd-client-address=etcd.example.com:2379"},
			wantErr: "must be a loopback address"},
		{name: "embedded etcd's quota", args: []string{"--embedded-etcd-quota-backend-bytes=0"}, wantErr: "must be positive"},
		{name: "negative TTL", args: []string{"--event-ttl=-1s"}, wantErr: "--event-ttl must not be negative"},
		{name: "TTL rule", args: []string{"--event-ttl-rule=type=Warning:500ms"}, wantErr: "must be at least 1s"},
		{name: "history-only", args: []string{"--history-only"}},
		{name: "cluster name", args: []string{"--history-cluster-name=eu-west-1"}},
		{name: "cluster name not a DNS label", args: []string{"--history-cluster-name=EU_West"}, wantErr: `--history-cluster-name "EU_West"`},
		{name: "certificate validity too short", args: []string{"--self-signed-cert-validity=10s"}, wantErr: "at least 1m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := complete(t, tc.args...).Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestSizeEstimate: standalone, without priority and fairness, the etcd3
// store's object size estimate is off unless the SizeBasedListCostEstimate
// gate was set; aggregated, where priority and fairness runs, kube's default
// stands.
func TestSizeEstimate(t *testing.T) {
	gate := utilfeature.DefaultMutableFeatureGate
	for _, tc := range []struct {
		name string
		args []string
		// set is the gate's value from --feature-gates, if given.
		set *bool
		// emulated is --emulated-version, if given.
		emulated string
		want     bool
	}{
		{name: "standalone", want: false},
		{name: "standalone, gate set", set: ptr.To(true), want: true},
		{name: "standalone, emulating a version before the gate", emulated: "1.33", want: false},
		{name: "aggregated", args: []string{"--aggregated", "--etcd-servers=http://127.0.0.1:2379"}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reset := func() {
				if err := gate.ResetFeatureValueToDefault(genericfeatures.SizeBasedListCostEstimate); err != nil {
					t.Fatal(err)
				}
			}
			reset()
			t.Cleanup(reset)
			if tc.emulated != "" {
				featuregatetesting.SetFeatureGateEmulationVersionDuringTest(t, gate, version.MustParse(tc.emulated))
			}
			if tc.set != nil {
				featuregatetesting.SetFeatureGateDuringTest(t, gate, genericfeatures.SizeBasedListCostEstimate, *tc.set)
			}
			if err := complete(t, tc.args...).setFeatureDefaults(gate); err != nil {
				t.Fatal(err)
			}
			if got := gate.Enabled(genericfeatures.SizeBasedListCostEstimate); got != tc.want {
				t.Errorf("SizeBasedListCostEstimate enabled: %v, want %v", got, tc.want)
			}
		})
	}
}

// complete parses args as the command line, with a fresh --data-dir, and
// completes them.
func complete(t *testing.T, args ...string) *completedOptions {
	t.Helper()
	c, err := parse(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parse parses args as the command line, with a fresh --data-dir, and
// returns Complete's answer.
func parse(t *testing.T, args ...string) (*completedOptions, error) {
	t.Helper()
	o := NewOptions()
	fss := o.commandFlags()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, f := range fss.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(append([]string{"--data-dir=" + t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	return o.Complete(fss)
}
