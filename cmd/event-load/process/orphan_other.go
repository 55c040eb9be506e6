//go:build !linux

package process

import "os/exec"

// startOrphanSafe starts cmd; only Linux has a parent-death signal.
func startOrphanSafe(cmd *exec.Cmd) error { return cmd.Start() }
