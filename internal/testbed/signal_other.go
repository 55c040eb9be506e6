//go:build !unix

package testbed

import "os"

// Without job control a process can be neither paused nor continued.
var stopSignal, continueSignal os.Signal
