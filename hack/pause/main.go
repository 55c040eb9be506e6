// Command pause is the pod sandbox ("pause") image's program for the
// real-cluster tier (test/cluster): it holds the pod's namespaces open,
// reaps the zombies a shared PID namespace leaves it, and exits on SIGTERM
// or SIGINT as Kubernetes' own pause does. No registry is reachable on the
// test machines, so hack/build-cluster-images.sh builds it into an image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap waits for every child that has exited; one SIGCHLD may stand for
// several.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
