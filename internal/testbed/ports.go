package testbed

import (
	"fmt"
	"net"
	"slices"

	"k8s.io/klog/v2"
)

// FreePorts returns n distinct ports that were free on 127.0.0.1 a moment
// ago (all held open together, so they differ). Someone may take one before
// it is used; starters retry on "address already in use".
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserving a loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portAttempts is how many times a starter tries fresh ports.
const portAttempts = 3

// addrInUse is what etcd, kube-apiserver and event-apiserver log when a
// port they were given is taken.
const addrInUse = "address already in use"

// retryOnPortClash calls try with attempt 1, 2, ... until it succeeds, or
// fails with none of the processes it started having logged addrInUse: a
// port picked by FreePorts can be taken by someone else before the child
// binds it. try must stop what it started before it returns an error.
func retryOnPortClash(what string, try func(attempt int) ([]*Process, error)) error {
	var err error
	for attempt := 1; attempt <= portAttempts; attempt++ {
		var started []*Process
		if started, err = try(attempt); err == nil {
			return nil
		}
		if !slices.ContainsFunc(started, func(p *Process) bool { return p != nil && p.LogContains(addrInUse) }) {
			return err
		}
		klog.InfoS("A port was taken, starting again on new ports", "process", what, "attempt", attempt, "err", err)
	}
	return err
}
