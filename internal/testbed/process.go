package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout is how long Stop waits after SIGTERM before SIGKILL, and Kill
// after SIGKILL before giving up.
const stopTimeout = 30 * time.Second

// Process is one program with fixed arguments that can be started any
// number of times (restarts keep the same arguments and append to the same
// log). Its methods are safe to call from any goroutine.
type Process struct {
	Name    string
	Path    string
	Args    []string
	LogPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has been waited for
	waitErr error
	started time.Time
	starts  int
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
	// The child has its own copy of the descriptor.
	defer func() { _ = log.Close() }()
	p.starts++
	fmt.Fprintf(log, "=== %s start #%d at %s: %s %s\n", p.Name, p.starts,
		time.Now().Format(time.RFC3339Nano), p.Path, strings.Join(p.Args, " "))
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

func (p *Process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// alive is the current process while it runs; ok is false when there is
// none or it has been waited for.
func (p *Process) alive() (cmd *exec.Cmd, done chan struct{}, ok bool) {
	cmd, done = p.current()
	if cmd == nil {
		return nil, nil, false
	}
	select {
	case <-done:
		return nil, nil, false
	default:
		return cmd, done, true
	}
}

// StartedAt is when the current (or last) process was started.
func (p *Process) StartedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// PID is the process id while it runs (paused included), else 0.
func (p *Process) PID() int {
	if cmd, _, ok := p.alive(); ok {
		return cmd.Process.Pid
	}
	return 0
}

// Running reports whether the process is alive (paused included).
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

// Stop sends SIGTERM and waits; after 30s it kills. A process that is not
// running is left alone.
func (p *Process) Stop() error {
	cmd, done, ok := p.alive()
	if !ok {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	// A paused process would act on SIGTERM only once continued.
	if continueSignal != nil {
		_ = cmd.Process.Signal(continueSignal)
	}
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

// Kill sends SIGKILL and waits for the process to exit. A process that is
// not running is left alone.
func (p *Process) Kill() error {
	cmd, done, ok := p.alive()
	if !ok {
		return nil
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, cmd.Process.Pid)
	}
}

// Pause freezes the process with SIGSTOP and waits until every thread has
// stopped: signal delivery is asynchronous, and on a busy machine a process
// can go on serving for a while after kill(2) returned. Its ports stay open
// but it answers nothing, like a hung server.
func (p *Process) Pause() error {
	if err := p.signal(stopSignal); err != nil {
		return err
	}
	return p.waitThreadsStopped(true, 10*time.Second)
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error {
	if err := p.signal(continueSignal); err != nil {
		return err
	}
	return p.waitThreadsStopped(false, 10*time.Second)
}

func (p *Process) signal(sig os.Signal) error {
	if sig == nil {
		return fmt.Errorf("%s: this platform has no job control signals", p.Name)
	}
	cmd, _, ok := p.alive()
	if !ok {
		return fmt.Errorf("%s is not running (%s)", p.Name, p.Exited())
	}
	return cmd.Process.Signal(sig)
}

// Poll calls f every interval until it succeeds, ctx ends, or the process
// exits; the exit is checked first, so that a crash is not taken for a slow
// start.
func (p *Process) Poll(ctx context.Context, interval time.Duration, f func() error) error {
	var last error
	for {
		if !p.Running() {
			return fmt.Errorf("%s %s", p.Name, p.Exited())
		}
		if last = f(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(interval):
		}
	}
}

// Tail is the last n lines of the log, framed so that several can follow
// one another in a report.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log for %s: %v)", p.Name, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("----- last %d lines of %s (%s) -----\n%s\n----- end of %s -----",
		len(lines), p.Name, p.LogPath, strings.Join(lines, "\n"), p.Name)
}

// LogContains reports whether the log holds s.
func (p *Process) LogContains(s string) bool {
	data, err := os.ReadFile(p.LogPath)
	return err == nil && bytes.Contains(data, []byte(s))
}
