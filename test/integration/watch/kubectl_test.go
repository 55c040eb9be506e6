package watch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// kubectlWatch is a running `kubectl get events -w --output-watch-events`.
type kubectlWatch struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	stderr lockedBuffer
	done   chan struct{}
	err    error
}

func startKubectlWatch(t *testing.T, kubeconfig, ns string) *kubectlWatch {
	t.Helper()
	k := &kubectlWatch{done: make(chan struct{})}
	k.cmd = exec.Command(framework.PreinstalledKubectl(t), "get", "events", "-n", ns, "-w", "--output-watch-events")
	k.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig,
		"KUBECACHEDIR="+filepath.Join(filepath.Dir(kubeconfig), "kubectl-cache"))
	k.cmd.Stderr = &k.stderr
	stdout, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			k.mu.Lock()
			k.lines = append(k.lines, sc.Text())
			k.mu.Unlock()
		}
		k.err = k.cmd.Wait()
		close(k.done)
	}()
	t.Cleanup(func() {
		_ = k.cmd.Process.Kill()
		<-k.done
	})
	return k
}

// lockedBuffer is a bytes.Buffer safe for a writing process and a reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitPrinted waits until a printed line holds all of words.
func (k *kubectlWatch) waitPrinted(ctx context.Context, words ...string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, line := range k.lines {
			all := true
			for _, w := range words {
				all = all && strings.Contains(line, w)
			}
			if all {
				return true, nil
			}
		}
		return false, nil
	})
}

func (k *kubectlWatch) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.Join(k.lines, "\n")
}

func (k *kubectlWatch) exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
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
	if err := k.waitPrinted(ctx, "ADDED", "event first"); err != nil {
		t.Fatalf("kubectl printed no initial ADDED line: %v\n%s\nstderr: %s", err, k.output(), k.stderr.String())
	}
	createEvents(ctx, t, client, ns, "before-restart")
	if err := k.waitPrinted(ctx, "ADDED", "event before-restart"); err != nil {
		t.Fatalf("kubectl did not print a watched Event: %v\n%s", err, k.output())
	}

	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	createEvents(ctx, t, client, ns, "after-restart")
	select {
	case <-k.done:
	case <-time.After(10 * time.Second):
	}
	if !k.exited() {
		// A kubectl that re-watches by itself would print the new Event.
		if err := k.waitPrinted(ctx, "event after-restart"); err != nil {
			t.Fatalf("kubectl neither exited nor printed the Event written after the restart:\n%s", k.output())
		}
		t.Log("kubectl kept watching across the restart")
		return
	}
	var exitErr *exec.ExitError
	code := 0
	if errors.As(k.err, &exitErr) {
		code = exitErr.ExitCode()
	}
	t.Logf("kubectl exited with status %d when the server restarted; stderr: %q; output:\n%s",
		code, strings.TrimSpace(k.stderr.String()), k.output())
	if strings.Contains(k.output(), "after-restart") {
		t.Errorf("kubectl exited, yet printed an Event written after the restart")
	}

	// Run again, as a user (or a shell loop) would.
	again := startKubectlWatch(t, server.Kubeconfig, ns)
	if err := again.waitPrinted(ctx, "ADDED", "event after-restart"); err != nil {
		t.Fatalf("kubectl run again does not list the Event written after the restart: %v\n%s", err, again.output())
	}
	createEvents(ctx, t, client, ns, "watched-again")
	if err := again.waitPrinted(ctx, "ADDED", "event watched-again"); err != nil {
		t.Fatalf("kubectl run again does not print new Events: %v\n%s", err, again.output())
	}
}
