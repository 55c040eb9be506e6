package app

import (
	"reflect"
	"testing"

	"github.com/spf13/pflag"
)

func TestAggregatedOnlyFlags(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{args: nil, want: nil},
		{args: []string{"--event-ttl=5m", "--enable-priority-and-fairness=false"}, want: nil},
		{args: []string{"--aggregated", "--kubeconfig=/k"}, want: []string{"--kubeconfig"}},
		{args: []string{"--requestheader-client-ca-file=/ca", "--enable-priority-and-fairness"},
			want: []string{"--requestheader-client-ca-file", "--enable-priority-and-fairness"}},
	}
	for _, tc := range cases {
		flagSets := NewOptions().Flags()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		for _, f := range flagSets.FlagSets {
			fs.AddFlagSet(f)
		}
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := aggregatedOnlyFlags(flagSets); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: got %q, want %q", tc.args, got, tc.want)
		}
	}
}
