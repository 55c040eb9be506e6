package eventmetrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		off     bool
	}{
		{name: "defaults"},
		{name: "allow-lists", args: []string{"--event-metrics-reasons=BackOff,FailedScheduling", "--event-metrics-namespaces=prod", "--event-metrics-kinds=Pod"}},
		{name: "off", args: []string{"--event-metrics-max-series=0"}, off: true},
		{name: "smallest cap", args: []string{fmt.Sprintf("--event-metrics-max-series=%d", MinMaxSeries)}},
		{name: "cap below the fold series", args: []string{"--event-metrics-max-series=3"}, wantErr: "--event-metrics-max-series must be 0 (off) or at least 4"},
		{name: "negative cap", args: []string{"--event-metrics-max-series=-1"}, wantErr: "--event-metrics-max-series must be 0 (off) or at least 4"},
		{name: "empty value", args: []string{"--event-metrics-kinds=Pod,"}, wantErr: "--event-metrics-kinds lists an empty value"},
		{name: "the fold value", args: []string{"--event-metrics-namespaces=_other"}, wantErr: "--event-metrics-namespaces lists _other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			errs := o.Validate()
			if tc.wantErr != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want one error with %q", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("Validate() = %v", errs)
			}
			if c := o.Counter(); (c == nil) != tc.off {
				t.Errorf("Counter() = %v, want nil %v", c, tc.off)
			}
		})
	}
}
