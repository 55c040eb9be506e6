//go:build !unix

package proc

import "os"

// Without job control a process can be neither paused nor continued.
var stopSignal, continueSignal os.Signal
