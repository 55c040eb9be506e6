package framework

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestEtcdSingleMemberKillRestart(t *testing.T) {
	t.Parallel()
	e := StartEtcd(t)
	c := e.Client(t)

	put := func(key, value string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Put(ctx, key, value); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	get := func(key string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := c.Get(ctx, key)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		if len(resp.Kvs) != 1 {
			t.Fatalf("get %s: %d keys", key, len(resp.Kvs))
		}
		return string(resp.Kvs[0].Value)
	}

	put("/test/a", "1")
	if v := get("/test/a"); v != "1" {
		t.Fatalf("got %q, want 1", v)
	}

	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	if e.Running() {
		t.Fatal("etcd still running after Kill")
	}
	if err := e.Restart(); err != nil {
		t.Fatal(err)
	}
	// The same client reconnects: same port, same data.
	if v := get("/test/a"); v != "1" {
		t.Fatalf("after kill+restart got %q, want 1", v)
	}

	put("/test/b", "2")
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.Restart(); err != nil {
		t.Fatal(err)
	}
	if v := get("/test/b"); v != "2" {
		t.Fatalf("after stop+restart got %q, want 2", v)
	}

	// Pause/Resume: a paused etcd times out requests, a resumed one answers.
	if err := e.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := c.Get(ctx, "/test/a")
	cancel()
	if err == nil {
		t.Fatal("get from a paused etcd succeeded")
	}
	if err := e.Resume(); err != nil {
		t.Fatal(err)
	}
	if v := get("/test/a"); v != "1" {
		t.Fatalf("after resume got %q, want 1", v)
	}
}

// The default --watch-progress-notify-interval (1s) makes etcd send progress
// notifications on an idle watch that asks for them.
func TestEtcdProgressNotify(t *testing.T) {
	t.Parallel()
	e := StartEtcd(t)
	c := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w := c.Watch(ctx, "/idle/", clientv3.WithPrefix(), clientv3.WithProgressNotify())
	start := time.Now()
	for resp := range w {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		if resp.IsProgressNotify() {
			t.Logf("progress notification after %v at revision %d", time.Since(start), resp.Header.Revision)
			return
		}
	}
	t.Fatal("no progress notification within 15s")
}

func TestEtcdCluster(t *testing.T) {
	t.Parallel()
	cl := StartEtcdCluster(t, 3)
	if len(cl.Members) != 3 {
		t.Fatalf("%d members", len(cl.Members))
	}
	for _, m := range cl.Members {
		if err := m.WaitHealthy(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	c := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ml, err := c.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 3 {
		t.Fatalf("member list has %d members, want 3", len(ml.Members))
	}
	if _, err := c.Put(ctx, "/k", "v1"); err != nil {
		t.Fatal(err)
	}

	// Lose one member: the other two keep a quorum.
	victim := cl.Members[1]
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	// If the victim led, a proposal made before the others notice is dropped
	// and times out (etcd's request timeout, ~7s); clients retry, so do we.
	if err := cl.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Put(pctx, "/k", "v2")
		pcancel()
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("put with one member down: %v", err)
		}
		t.Logf("put with one member down, attempt %d: %v", attempt, err)
	}
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The restarted member caught up.
	resp, err := victim.Client(t).Get(ctx, "/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
		t.Fatalf("restarted member has %v, want v2", resp.Kvs)
	}

	// Lose all: Start each without waiting, then wait for the quorum.
	for _, m := range cl.Members {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range cl.Members {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	resp, err = c.Get(ctx, "/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
		t.Fatalf("after full restart got %v, want v2", resp.Kvs)
	}
}
