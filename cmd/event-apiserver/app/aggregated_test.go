package app

import (
	"reflect"
	"strings"
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

func TestServingCertFlags(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		wantUnused []string
		wantErr    bool
	}{
		{name: "none", args: []string{"--aggregated"}},
		{name: "secret with tuning", args: []string{"--aggregated", "--serving-cert-secret=ns/s", "--serving-cert-validity=1h", "--apiservice-names=v1.events.k8s.io,v1alpha1.history.example.com"}},
		{name: "tuning without secret", args: []string{"--aggregated", "--serving-cert-validity=1h", "--apiservice-names=x"},
			wantUnused: []string{"--apiservice-names", "--serving-cert-validity"}},
		{name: "secret not namespace/name", args: []string{"--aggregated", "--serving-cert-secret=s"}, wantErr: true},
		{name: "renew fraction out of range", args: []string{"--aggregated", "--serving-cert-secret=ns/s", "--serving-cert-renew-fraction=1"}, wantErr: true},
		{name: "CA shorter than leaf", args: []string{"--aggregated", "--serving-cert-secret=ns/s", "--serving-cert-ca-validity=1h", "--serving-cert-validity=2h"}, wantErr: true},
		{name: "secret and certificate files", args: []string{"--aggregated", "--serving-cert-secret=ns/s", "--tls-cert-file=/c", "--tls-private-key-file=/k"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			flagSets := o.Flags()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			for _, f := range flagSets.FlagSets {
				fs.AddFlagSet(f)
			}
			if err := fs.Parse(append(tc.args, "--etcd-servers=https://127.0.0.1:2379")); err != nil {
				t.Fatal(err)
			}
			if got := o.Aggregated.ServingCert.UnusedFlags(flagSets.FlagSet("aggregated")); !reflect.DeepEqual(got, tc.wantUnused) {
				t.Errorf("unused flags %q, want %q", got, tc.wantUnused)
			}
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if got := err != nil && strings.Contains(err.Error(), "serving-cert"); got != tc.wantErr {
				t.Errorf("Validate: %v, want a serving-cert error: %v", err, tc.wantErr)
			}
		})
	}
}
