//go:build !linux && !freebsd

package proc

import "os/exec"

// startOrphanSafe starts cmd; only Linux and FreeBSD have a parent-death
// signal.
func startOrphanSafe(cmd *exec.Cmd) error { return cmd.Start() }
