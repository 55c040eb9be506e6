package app

import (
	"context"
	"net"
	"reflect"
	"strconv"
	"testing"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
)

// TestConfigWritesNoOption builds a standalone server's configuration and
// finds the options as the flags set them, and the completed options as
// Complete left them: the listener, the generated certificate's files, the
// embedded etcd's address and priority and fairness all went into copies.
func TestConfigWritesNoOption(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	args := []string{"--data-dir=" + dataDir, "--secure-port=" + strconv.Itoa(port), "--history=false",
		"--event-ttl-rule=type=Warning:1h"}
	parsed := func() (*Options, cliflag.NamedFlagSets) {
		o := NewOptions()
		fss := o.commandFlags()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		for _, f := range fss.FlagSets {
			fs.AddFlagSet(f)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o, fss
	}
	o, fss := parsed()
	c, err := o.Complete(fss)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	completedServing := *c.SecureServing.SecureServingOptions
	p := prerequisites{etcdServers: []string{"unix://" + dataDir + "/etcd/etcd.sock"}, adminToken: "token"}
	if err := c.prepareServingCert(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	config, err := c.Config(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = config.GenericConfig.SecureServing.Listener.Close() })

	fresh, _ := parsed()
	for _, field := range []struct {
		name      string
		got, want any
	}{
		{"--data-dir", o.DataDir, fresh.DataDir},
		{"secure serving", *o.SecureServing.SecureServingOptions, *fresh.SecureServing.SecureServingOptions},
		{"etcd", *o.Etcd, *fresh.Etcd},
		{"features", *o.Features, *fresh.Features},
		{"history", *o.History, *fresh.History},
		{"delegated authentication", *o.Aggregated.Authentication, *fresh.Aggregated.Authentication},
		{"delegated authorization", *o.Aggregated.Authorization, *fresh.Aggregated.Authorization},
		{"completed secure serving", *c.SecureServing.SecureServingOptions, completedServing},
	} {
		if !reflect.DeepEqual(field.got, field.want) {
			t.Errorf("%s changed:\n got %+v\nwant %+v", field.name, field.got, field.want)
		}
	}
	// What went into the copies did reach the configuration.
	if config.GenericConfig.SecureServing.Cert == nil || config.GenericConfig.FlowControl != nil {
		t.Errorf("configuration: serving certificate %v, priority and fairness %v; want the self-signed one and none",
			config.GenericConfig.SecureServing.Cert, config.GenericConfig.FlowControl)
	}
	if config.ExtraConfig.TTL == nil || config.GenericConfig.AdmissionControl == nil {
		t.Errorf("configuration: TTL rules %v, admission %v; want both (%s)", config.ExtraConfig.TTL, config.GenericConfig.AdmissionControl, storm.PluginName)
	}
}
