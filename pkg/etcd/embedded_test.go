package etcd

import (
	"path/filepath"
	"testing"
	"time"
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
