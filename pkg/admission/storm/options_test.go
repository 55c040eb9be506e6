package storm

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestOptions(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "limits off", args: []string{"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0",
			"--event-rate-limit-global-qps=0", "--max-event-bytes=0"}},
		{name: "negative qps", args: []string{"--event-rate-limit-qps=-1"}, wantErr: "--event-rate-limit-qps must not be negative"},
		{name: "no burst", args: []string{"--event-rate-limit-update-burst=0"},
			wantErr: "--event-rate-limit-update-burst must be at least 1 when --event-rate-limit-update-qps is set"},
		{name: "no burst, limit off", args: []string{"--event-rate-limit-global-qps=0", "--event-rate-limit-global-burst=0"}},
		{name: "no reporters", args: []string{"--event-rate-limit-max-reporters=0"}, wantErr: "--event-rate-limit-max-reporters must be at least 1"},
		{name: "negative size", args: []string{"--max-event-bytes=-1"}, wantErr: "--max-event-bytes must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			errs := o.Validate()
			var got []string
			for _, err := range errs {
				got = append(got, err.Error())
			}
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("unexpected errors: %v", got)
			case tc.wantErr != "" && !strings.Contains(strings.Join(got, "\n"), tc.wantErr):
				t.Errorf("errors %v, want %q", got, tc.wantErr)
			}
		})
	}
	c := NewOptions().Config()
	if c.Create != (Limit{QPS: DefaultCreateQPS, Burst: DefaultCreateBurst}) || c.MaxEventBytes != DefaultMaxEventBytes {
		t.Errorf("default config %+v", c)
	}
}
