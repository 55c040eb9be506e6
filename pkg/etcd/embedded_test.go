package etcd

import (
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/pkg/v3/featuregate"
	"go.etcd.io/etcd/server/v3/features"
)

// TestErrReportsServerStop stops the etcd server under a running Embedded,
// as raft or storage errors do, and expects Err to report it: the command
// exits non-zero on it. Close afterwards reports nothing more.
func TestErrReportsServerStop(t *testing.T) {
	e, err := StartEmbedded(EmbeddedConfig{
		DataDir:                filepath.Join(t.TempDir(), "etcd"),
		ClientAddress:          "127.0.0.1:0",
		ProgressNotifyInterval: time.Second,
		ReadyTimeout:           time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case err := <-e.Err():
		t.Fatalf("failure reported before any: %v", err)
	default:
	}
	e.etcd.Server.HardStop()
	select {
	case err := <-e.Err():
		if err == nil {
			t.Fatal("nil error reported")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("etcd stopped, no failure reported")
	}
}

// TestErrSilentOnClose closes a healthy Embedded: that is no failure.
func TestErrSilentOnClose(t *testing.T) {
	e, err := StartEmbedded(EmbeddedConfig{
		DataDir:                filepath.Join(t.TempDir(), "etcd"),
		ClientAddress:          "127.0.0.1:0",
		ProgressNotifyInterval: time.Second,
		ReadyTimeout:           time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	select {
	case err := <-e.Err():
		t.Fatalf("Close reported as a failure: %v", err)
	case <-time.After(time.Second):
	}
}

// TestLeaseCheckpoints pins that the embedded etcd checkpoints leases and
// persists the checkpoints, without which each restart renews every Event's
// lease to its full TTL.
func TestLeaseCheckpoints(t *testing.T) {
	e, err := StartEmbedded(EmbeddedConfig{
		DataDir:                filepath.Join(t.TempDir(), "etcd"),
		ClientAddress:          "127.0.0.1:0",
		ProgressNotifyInterval: time.Second,
		ReadyTimeout:           time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, f := range []featuregate.Feature{features.LeaseCheckpoint, features.LeaseCheckpointPersist} {
		if !e.etcd.Server.FeatureEnabled(f) {
			t.Errorf("feature gate %s is off", f)
		}
	}
}
