package testbed

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func sleeper(t *testing.T) *Process {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	p := &Process{Name: "sleep", Path: path, Args: []string{"60"}, LogPath: filepath.Join(t.TempDir(), "sleep.log")}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func TestProcessLifecycle(t *testing.T) {
	p := sleeper(t)
	if p.Running() || p.Exited() != "never started" {
		t.Fatalf("before start: running %v, %s", p.Running(), p.Exited())
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err == nil {
		t.Fatal("second Start of a running process succeeded")
	}
	if _, err := CPUTime(p.PID()); err != nil {
		t.Error(err)
	}
	if _, err := RSS(p.PID()); err != nil {
		t.Error(err)
	}

	// A paused process still runs, and Stop must get it out of the pause.
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if !p.Running() {
		t.Fatal("paused process is not running")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if p.Running() || !strings.Contains(p.Exited(), "terminated") {
		t.Fatalf("after Stop: running %v, %s", p.Running(), p.Exited())
	}

	// Restarts append to the same log.
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Exited(), "killed") {
		t.Fatalf("after Kill: %s", p.Exited())
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill of a dead process: %v", err)
	}
	if !p.LogContains("=== sleep start #2 at ") {
		t.Fatalf("log lacks the second start:\n%s", p.Tail(10))
	}
}

func TestPollStopsWhenTheProcessExits(t *testing.T) {
	p := sleeper(t)
	p.Args = []string{"0"}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := p.Poll(ctx, 10*time.Millisecond, func() error { return os.ErrNotExist })
	if err == nil || !strings.Contains(err.Error(), "sleep exited with status 0") {
		t.Fatalf("Poll: %v", err)
	}
}

// TestFreePortsDiffer: the ports differ, and lie below the ephemeral range
// where the kernel can read it, so that no outgoing connection holds one.
func TestFreePortsDiffer(t *testing.T) {
	ports, err := FreePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	floor := ephemeralFloor()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		if floor > lowestPort+1000 && (p < lowestPort || p >= floor) {
			t.Errorf("port %d outside [%d, %d)", p, lowestPort, floor)
		}
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "testbed", "process.go")); err != nil {
		t.Fatal(err)
	}
}
