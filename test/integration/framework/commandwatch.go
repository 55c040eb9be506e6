package framework

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// CommandWatch is a running command that prints as it goes (`kubectl get
// -w`, `kubectl timeline -w`) and the lines it printed so far.
type CommandWatch struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	stderr lockedBuffer
	done   chan struct{}
	// Err is the command's exit, once Done is closed.
	Err error
}

// StartCommandWatch runs bin with args against kubeconfig, as Kubectl does
// (its own discovery cache), until it exits or the test ends.
func StartCommandWatch(t *testing.T, bin, kubeconfig string, args ...string) *CommandWatch {
	t.Helper()
	k := &CommandWatch{done: make(chan struct{})}
	k.cmd = exec.Command(bin, args...)
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
		k.Err = k.cmd.Wait()
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

// WaitPrinted waits until a printed line holds all of words.
func (k *CommandWatch) WaitPrinted(ctx context.Context, words ...string) error {
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

// Output is what it printed on stdout so far.
func (k *CommandWatch) Output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.Join(k.lines, "\n")
}

// Stderr is what it printed on stderr so far.
func (k *CommandWatch) Stderr() string { return k.stderr.String() }

// Done is closed once the command exited.
func (k *CommandWatch) Done() <-chan struct{} { return k.done }

// Exited says whether the command exited.
func (k *CommandWatch) Exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}
