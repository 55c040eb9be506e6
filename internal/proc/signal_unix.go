//go:build unix

package proc

import (
	"os"
	"syscall"
)

var stopSignal, continueSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
