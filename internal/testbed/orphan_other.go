//go:build !linux && !freebsd

package testbed

import "os/exec"

// startOrphanSafe starts cmd; only Linux and FreeBSD have a parent-death
// signal.
func startOrphanSafe(cmd *exec.Cmd) error { return cmd.Start() }
