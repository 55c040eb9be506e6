package testbed

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"

	"k8s.io/klog/v2"
)

// FreePorts returns n distinct ports that were free on 127.0.0.1 a moment
// ago (all held open together, so they differ). Someone may take one before
// it is used; starters retry on "address already in use". The ports come
// from below the kernel's ephemeral range (ephemeralFloor), where every
// outgoing connection takes its local port: a process restarted on its own
// ports, as a killed etcd is, found its peer port taken by some client's
// connection meanwhile (TestEtcdKilledUnderLoad in CI, 2026-11-29).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	floor := ephemeralFloor()
	for attempts := 0; len(ports) < n; attempts++ {
		address := "127.0.0.1:0"
		if floor > lowestPort+1000 && attempts < 100*n {
			address = fmt.Sprintf("127.0.0.1:%d", lowestPort+rand.IntN(floor-lowestPort))
		}
		l, err := net.Listen("tcp", address)
		if err != nil {
			if address != "127.0.0.1:0" {
				continue
			}
			return nil, fmt.Errorf("reserving a loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// lowestPort is the lowest port FreePorts picks: above the well-known and
// most services' registered ports.
const lowestPort = 10000

// ephemeralFloor is the first port of the kernel's ephemeral range, or 0
// where it cannot be read (FreePorts then lets the kernel pick).
func ephemeralFloor() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0
	}
	return low
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
