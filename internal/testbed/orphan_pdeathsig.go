//go:build linux || freebsd

package testbed

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// startOrphanSafe starts cmd with a parent-death signal, so that children
// do not outlive a load tool or test binary that is killed (by `go test
// -timeout`, say). The signal fires when the thread that forked the child
// exits, and the Go runtime may retire threads, so every child is forked
// from one goroutine locked to its thread for the life of the process.
func startOrphanSafe(cmd *exec.Cmd) error {
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	starter.once.Do(func() {
		starter.reqs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for req := range starter.reqs {
				req()
			}
		}()
	})
	errc := make(chan error, 1)
	starter.reqs <- func() { errc <- cmd.Start() }
	return <-errc
}

var starter struct {
	once sync.Once
	reqs chan func()
}
