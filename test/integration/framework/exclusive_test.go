package framework

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestMachineLock holds the lock as four test binaries would, each its own
// open files (flock(2) locks belong to the open file, so one process stands
// in for several): an exclusive test waits for the binary running beside
// it, binaries that start meanwhile wait behind it, and all go on once it
// ends.
func TestMachineLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() *machineLock {
		t.Helper()
		m, err := openMachineLock(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.close() })
		return m
	}
	running, storm, late, probe := open(), open(), open(), open()
	if waited, err := running.shared(); err != nil || waited {
		t.Fatalf("the first binary's shared hold: waited %v, %v", waited, err)
	}
	// The storm binary holds the lock shared too until its exclusive test.
	if waited, err := storm.shared(); err != nil || waited {
		t.Fatalf("a second binary's shared hold: waited %v, %v", waited, err)
	}

	exclusive := make(chan error, 1)
	go func() { exclusive <- storm.exclusive() }()
	// The exclusive test is waiting once it holds the gate: a binary
	// starting now cannot take its shared hold.
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ok, err := probe.tryShared()
		if ok {
			_ = probe.release()
		}
		return !ok, err
	})
	if err != nil {
		t.Fatalf("a binary starting while an exclusive test waits got in: %v", err)
	}
	select {
	case err := <-exclusive:
		t.Fatalf("the exclusive test got the lock while another binary held it shared (%v)", err)
	default:
	}

	lateHold := make(chan error, 1)
	go func() {
		_, err := late.shared()
		lateHold <- err
	}()
	if err := running.release(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exclusive:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exclusive test still waits after the other binary ended")
	}
	if ok, err := probe.tryShared(); ok || err != nil {
		t.Fatalf("a shared hold beside the exclusive test: %v %v", ok, err)
	}
	select {
	case err := <-lateHold:
		t.Fatalf("the late binary got in beside the exclusive test (%v)", err)
	default:
	}

	if err := storm.release(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lateHold:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late binary still waits after the exclusive test ended")
	}
	if waited, err := storm.shared(); err != nil {
		t.Fatalf("the storm binary's shared hold after its exclusive test: waited %v, %v", waited, err)
	}
}
