package etcd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestSocketInDataDir: with no client address the embedded etcd serves only
// on a unix socket inside its data directory, the same path again after a
// restart (the stale socket file does not stop it), and the data survives.
func TestSocketInDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	start := func() *Embedded {
		t.Helper()
		e, err := StartEmbedded(EmbeddedConfig{DataDir: dir, ProgressNotifyInterval: time.Second, ReadyTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	roundTrip := func(e *Embedded, put bool) {
		t.Helper()
		want := "unix://" + filepath.Join(dir, socketName)
		if got := e.ClientURL(); got != want {
			t.Fatalf("client URL %q, want %q", got, want)
		}
		client, err := clientv3.New(clientv3.Config{Endpoints: []string{e.ClientURL()}, DialTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if put {
			if _, err := client.Put(ctx, "/k", "v"); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := client.Get(ctx, "/k")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
			t.Fatalf("get /k: %v %v", resp, err)
		}
	}

	e := start()
	roundTrip(e, true)
	info, err := os.Stat(filepath.Join(dir, socketName))
	if err != nil || info.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no socket in the data dir: %v %v", info, err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("data dir %v %v, want 0700", info, err)
	}
	e.Close()
	// A socket file left behind, as after a crash.
	if err := os.WriteFile(filepath.Join(dir, socketName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e = start()
	defer e.Close()
	roundTrip(e, false)
}

// TestSocketPathTooLong: a data dir whose socket path does not fit a unix
// address is refused with advice, not moved to TCP behind the user's back.
func TestSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", maxSocketPath))
	_, err := StartEmbedded(EmbeddedConfig{DataDir: dir, ProgressNotifyInterval: time.Second, ReadyTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "--embedded-etcd-client-address") {
		t.Fatalf("error %v, want the socket path refused with advice", err)
	}
}
