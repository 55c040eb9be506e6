package watch

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// startKubectlWatch runs the preinstalled kubectl's `get events -w
// --output-watch-events`.
func startKubectlWatch(t *testing.T, kubeconfig, ns string) *framework.CommandWatch {
	t.Helper()
	return framework.StartCommandWatch(t, framework.PreinstalledKubectl(t), kubeconfig, "get", "events", "-n", ns, "-w", "--output-watch-events")
}

// TestKubectlWatchAcrossRestart runs the preinstalled kubectl's
// `get events -w --output-watch-events` across a server restart. kubectl
// does not re-watch: when the stream ends it stops (kubectl's get watch
// loop, watchtools.UntilWithoutRetry, returns ErrWatchClosed, which `get`
// ignores, so it exits 0 without a message). Run again, it prints the
// current Events as ADDED and then the new ones. The test asserts that, and
// that nothing hangs.
func TestKubectlWatchAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{watchShutdownFlag}})
	client := server.Client(t)
	const ns = "kubectl-watch"

	createEvents(ctx, t, client, ns, "first")
	k := startKubectlWatch(t, server.Kubeconfig, ns)
	if err := k.WaitPrinted(ctx, "ADDED", "event first"); err != nil {
		t.Fatalf("kubectl printed no initial ADDED line: %v\n%s\nstderr: %s", err, k.Output(), k.Stderr())
	}
	createEvents(ctx, t, client, ns, "before-restart")
	if err := k.WaitPrinted(ctx, "ADDED", "event before-restart"); err != nil {
		t.Fatalf("kubectl did not print a watched Event: %v\n%s", err, k.Output())
	}

	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	createEvents(ctx, t, client, ns, "after-restart")
	select {
	case <-k.Done():
	case <-time.After(10 * time.Second):
	}
	if !k.Exited() {
		// A kubectl that re-watches by itself would print the new Event.
		if err := k.WaitPrinted(ctx, "event after-restart"); err != nil {
			t.Fatalf("kubectl neither exited nor printed the Event written after the restart:\n%s", k.Output())
		}
		t.Log("kubectl kept watching across the restart")
		return
	}
	var exitErr *exec.ExitError
	code := 0
	if errors.As(k.Err, &exitErr) {
		code = exitErr.ExitCode()
	}
	t.Logf("kubectl exited with status %d when the server restarted; stderr: %q; output:\n%s",
		code, strings.TrimSpace(k.Stderr()), k.Output())
	if strings.Contains(k.Output(), "after-restart") {
		t.Errorf("kubectl exited, yet printed an Event written after the restart")
	}

	// Run again, as a user (or a shell loop) would.
	again := startKubectlWatch(t, server.Kubeconfig, ns)
	if err := again.WaitPrinted(ctx, "ADDED", "event after-restart"); err != nil {
		t.Fatalf("kubectl run again does not list the Event written after the restart: %v\n%s", err, again.Output())
	}
	createEvents(ctx, t, client, ns, "watched-again")
	if err := again.WaitPrinted(ctx, "ADDED", "event watched-again"); err != nil {
		t.Fatalf("kubectl run again does not print new Events: %v\n%s", err, again.Output())
	}
}
