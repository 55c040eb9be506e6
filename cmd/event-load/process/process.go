// Package process runs the programs a benchmark compares, etcd,
// kube-apiserver and event-apiserver, as child processes on loopback, each
// with its output in a log file, and reads what the kernel knows about them
// (CPU time, resident memory).
package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const stopTimeout = 30 * time.Second

// Process is one program with fixed arguments that can be started again
// (restarts keep the same arguments and append to the same log).
type Process struct {
	Name    string
	Path    string
	Args    []string
	LogPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	started time.Time
}

// Start runs the program. It fails if it is already running.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
		}
	}
	log, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	fmt.Fprintf(log, "=== %s at %s: %s %s\n", p.Name, time.Now().Format(time.RFC3339Nano), p.Path, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if err := startOrphanSafe(cmd); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.waitErr, p.started = cmd, done, nil, time.Now()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// StartedAt is when the current (or last) process was started.
func (p *Process) StartedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// PID is the process id while it runs, else 0.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Running reports whether the process is alive.
func (p *Process) Running() bool { return p.PID() != 0 }

// Exited describes how the process ended, for error messages.
func (p *Process) Exited() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.cmd == nil:
		return "never started"
	case p.waitErr != nil:
		return "exited: " + p.waitErr.Error()
	default:
		select {
		case <-p.done:
			return "exited with status 0"
		default:
			return fmt.Sprintf("running (pid %d)", p.cmd.Process.Pid)
		}
	}
}

// Stop sends SIGTERM and waits; after stopTimeout it kills. A process that
// is not running is left alone.
func (p *Process) Stop() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-done
	return fmt.Errorf("%s did not exit within %v of SIGTERM; killed it", p.Name, stopTimeout)
}

// Tail is the last n lines of the log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last %d lines of %s ---\n%s", len(lines), p.LogPath, strings.Join(lines, "\n"))
}

// LogContains reports whether the log holds s.
func (p *Process) LogContains(s string) bool {
	data, err := os.ReadFile(p.LogPath)
	return err == nil && bytes.Contains(data, []byte(s))
}
