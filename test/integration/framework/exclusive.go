package framework

// Tests that must have the machine to themselves. The integration tests are
// one package per area, and go test runs up to -p test binaries side by
// side, so a test kept out of t.Parallel still shares the cores with other
// packages' tests. A write storm that must see only 201 and 429, or a CPU or
// memory measurement, fails or measures noise then (etcd's health probe
// times out beside other tests' processes, and 503s appear).
//
// So the checkout has one reader-writer lock across processes, two flock(2)
// files under _output: every test binary whose TestMain is Main holds it
// shared while its tests run, and a test that calls Exclusive holds it
// exclusively, waiting until the binaries running beside it have finished.
// The second file, the gate, gives a waiting exclusive test precedence:
// while one waits or runs, binaries that start take their shared hold only
// after it. hack/test.sh runs the package of those tests, storm, before the
// others, so that in CI nothing waits.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// machineLock is the checkout's lock as one process holds it.
type machineLock struct {
	gate, lock *os.File
}

// openMachineLock opens (creating) the lock's two files in dir.
func openMachineLock(dir string) (*machineLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	gate, err := os.OpenFile(filepath.Join(dir, "integration.gate"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "integration.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		_ = gate.Close()
		return nil, err
	}
	return &machineLock{gate: gate, lock: lock}, nil
}

// flock is flock(2), retried when a signal interrupts the wait (the Go
// runtime's preemption signals do).
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// shared takes the lock shared, after any exclusive holder or waiter; it
// reports whether it had to wait.
func (m *machineLock) shared() (waited bool, err error) {
	if err := flock(m.gate, syscall.LOCK_SH|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		waited = true
		err = flock(m.gate, syscall.LOCK_SH)
		if err != nil {
			return waited, err
		}
	} else if err != nil {
		return false, err
	}
	defer func() { _ = flock(m.gate, syscall.LOCK_UN) }()
	return waited, flock(m.lock, syscall.LOCK_SH)
}

// tryShared is shared without waiting: false when it would wait.
func (m *machineLock) tryShared() (bool, error) {
	if err := flock(m.gate, syscall.LOCK_SH|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	defer func() { _ = flock(m.gate, syscall.LOCK_UN) }()
	if err := flock(m.lock, syscall.LOCK_SH|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}

// exclusive drops this process's shared hold and takes the lock
// exclusively. The shared hold goes first: two binaries that both wait for
// the gate while holding the lock shared would wait for each other.
func (m *machineLock) exclusive() error {
	if err := flock(m.lock, syscall.LOCK_UN); err != nil {
		return err
	}
	if err := flock(m.gate, syscall.LOCK_EX); err != nil {
		return err
	}
	return flock(m.lock, syscall.LOCK_EX)
}

// release drops whatever this process holds.
func (m *machineLock) release() error {
	return errors.Join(flock(m.lock, syscall.LOCK_UN), flock(m.gate, syscall.LOCK_UN))
}

func (m *machineLock) close() error {
	return errors.Join(m.lock.Close(), m.gate.Close())
}

// theLock is this test binary's hold, taken by Main.
var theLock struct {
	sync.Mutex
	*machineLock
}

// holdShared is Main's: the binary's shared hold for the whole run.
func holdShared() error {
	root, err := testbed.RepoRoot()
	if err != nil {
		return err
	}
	m, err := openMachineLock(filepath.Join(root, "_output"))
	if err != nil {
		return err
	}
	waitStart := time.Now()
	waited, err := m.shared()
	if err != nil {
		_ = m.close()
		return err
	}
	if waited {
		fmt.Fprintf(os.Stderr, "integration tests: waited %s for another package's exclusive test (framework.Exclusive)\n",
			time.Since(waitStart).Round(time.Second))
	}
	theLock.Lock()
	theLock.machineLock = m
	theLock.Unlock()
	return nil
}

// Exclusive makes t the only integration test running in this checkout
// until it ends: it waits until the other test binaries that hold the lock
// (every package whose TestMain is Main) have finished, and binaries that
// start meanwhile wait for t before running any test. Call it first thing
// in a top-level test that does not call t.Parallel: Go runs those one by
// one before any parallel test of the package resumes, so the package's own
// tests are not running either.
func Exclusive(t *testing.T) {
	t.Helper()
	theLock.Lock()
	defer theLock.Unlock()
	if theLock.machineLock == nil {
		t.Fatal("framework.Exclusive needs the package's TestMain to be framework.Main")
	}
	start := time.Now()
	if err := theLock.exclusive(); err != nil {
		t.Fatalf("taking the integration tests' lock exclusively: %v", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %s for the other integration test packages to finish", waited.Round(time.Second))
	}
	t.Cleanup(func() {
		theLock.Lock()
		defer theLock.Unlock()
		if err := theLock.release(); err != nil {
			t.Errorf("releasing the integration tests' lock: %v", err)
			return
		}
		if _, err := theLock.shared(); err != nil {
			t.Errorf("taking the integration tests' lock shared again: %v", err)
		}
	})
}
