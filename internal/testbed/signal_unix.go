//go:build unix

package testbed

import (
	"os"
	"syscall"
)

var stopSignal, continueSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
