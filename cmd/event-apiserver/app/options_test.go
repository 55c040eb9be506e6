package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
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
		{name: "aggregated with the embedded etcd", args: []string{"--aggregated"}, wantErr: "--aggregated needs --etcd-servers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			for _, f := range o.Flags().FlagSets {
				fs.AddFlagSet(f)
			}
			if err := fs.Parse(append([]string{"--data-dir=" + t.TempDir()}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
