package proc

import (
	"fmt"
	"net"
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
