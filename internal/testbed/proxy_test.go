package testbed

import (
	"bufio"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line and reads the echo within wait.
func roundTrip(c net.Conn, r *bufio.Reader, wait time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := r.ReadString('\n')
	return err
}

func TestProxyBlackholesAndHeals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		blackhole func(p *Proxy)
	}{
		{"everything", func(p *Proxy) { p.Blackhole() }},
		{"connections this process dialed", func(p *Proxy) { p.BlackholeFrom(os.Getpid()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewProxy(echoServer(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Close() }()
			p.IdentifyDialers(func() []int { return []int{os.Getpid()} })
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			r := bufio.NewReader(c)
			if err := roundTrip(c, r, 10*time.Second); err != nil {
				t.Fatalf("before the blackhole: %v", err)
			}
			tc.blackhole(p)
			if err := roundTrip(c, r, 300*time.Millisecond); err == nil {
				t.Fatal("an open connection still answered through the blackhole")
			}
			fresh, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fresh.Close() }()
			if err := roundTrip(fresh, bufio.NewReader(fresh), 300*time.Millisecond); err == nil {
				t.Fatal("a new connection answered through the blackhole")
			}
			p.Heal()
			healed, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = healed.Close() }()
			if err := roundTrip(healed, bufio.NewReader(healed), 10*time.Second); err != nil {
				t.Fatalf("after healing: %v", err)
			}
		})
	}
}

func TestProxyBlackholeFromSparesOthers(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	p.IdentifyDialers(func() []int { return []int{os.Getpid()} })
	p.BlackholeFrom(os.Getpid() + 1_000_000) // no such process
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := roundTrip(c, bufio.NewReader(c), 10*time.Second); err != nil {
		t.Fatalf("a connection from another process was blackholed: %v", err)
	}
}
