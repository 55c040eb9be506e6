package testbed

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
)

// Proxy is a fault-injecting TCP proxy on loopback in front of one address
// (an etcd member's client or peer port). It can blackhole everything, or
// only the connections dialed by given processes: a partition of one etcd
// member from its peers is the member's own peer proxy blackholed plus, on
// every other member's peer proxy, the connections the isolated member
// dialed (raft messages go both over streams the receiver dialed and over
// pipelines the sender dialed). Blackholed connections are held open and
// their bytes dropped, as on a network that lost its route: peers and
// clients find out by their own timeouts. Healing closes them, so that
// both ends dial again.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	all    bool
	pids   map[int]bool
	conns  map[*proxyConn]bool
	closed bool
	wg     sync.WaitGroup
	// candidates are the processes a dialer is looked for among; nil: no
	// lookup.
	candidates func() []int
}

type proxyConn struct {
	client, server net.Conn
	owner          int // the dialing process, when looked up; else 0
	blackholed     bool
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, pids: map[int]bool{}, conns: map[*proxyConn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is http://Addr.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// IdentifyDialers makes the proxy look up, in /proc, which of the
// candidates dialed each new connection, so that BlackholeFrom can select
// them.
func (p *Proxy) IdentifyDialers(candidates func() []int) {
	p.mu.Lock()
	p.candidates = candidates
	p.mu.Unlock()
}

// Blackhole drops everything through the proxy until Heal.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = true
	p.applyLocked()
}

// BlackholeFrom drops, until Heal, the connections dialed by process pid
// (IdentifyDialers must have been called before they were dialed).
func (p *Proxy) BlackholeFrom(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pids[pid] = true
	p.applyLocked()
}

// Heal ends every blackhole and closes the connections it held.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = false
	clear(p.pids)
	for c := range p.conns {
		if c.blackholed {
			p.closeLocked(c)
		}
	}
}

func (p *Proxy) applyLocked() {
	for c := range p.conns {
		if p.blockedLocked(c.owner) {
			c.blackholed = true
		}
	}
}

func (p *Proxy) blockedLocked(owner int) bool { return p.all || (owner != 0 && p.pids[owner]) }

func (p *Proxy) closeLocked(c *proxyConn) {
	_ = c.client.Close()
	if c.server != nil {
		_ = c.server.Close()
	}
	delete(p.conns, c)
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		p.closeLocked(c)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	c := &proxyConn{client: client}
	p.mu.Lock()
	candidates := p.candidates
	p.mu.Unlock()
	if candidates != nil {
		c.owner = dialerPID(client, candidates())
	}
	server, err := net.Dial("tcp", p.target)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = client.Close()
		if server != nil {
			_ = server.Close()
		}
		return
	}
	if err != nil {
		// The member is down: as without a proxy, the dial fails.
		p.mu.Unlock()
		_ = client.Close()
		return
	}
	c.server = server
	c.blackholed = p.blockedLocked(c.owner)
	p.conns[c] = true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(c, server, client); done <- struct{}{} }()
	go func() { p.pipe(c, client, server); done <- struct{}{} }()
	<-done
	p.mu.Lock()
	p.closeLocked(c)
	p.mu.Unlock()
	<-done
}

// pipe copies from src to dst, dropping what it reads while c is
// blackholed.
func (p *Proxy) pipe(c *proxyConn, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := c.blackholed
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// dialerPID finds which of pids dialed c, a loopback connection: the owner
// of the socket whose local address is c's remote address. 0 when none
// (or it cannot tell: the dialer already closed it, no /proc).
func dialerPID(c net.Conn, pids []int) int {
	remote, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return 0
	}
	local := c.LocalAddr().(*net.TCPAddr)
	inode := socketInode(remote.Port, local.Port)
	if inode == "" {
		return 0
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && link == want {
				return pid
			}
		}
	}
	return 0
}

// socketInode is the inode of the IPv4 TCP socket with local port
// localPort connected to remotePort, from /proc/net/tcp.
func socketInode(localPort, remotePort int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	wantLocal := fmt.Sprintf(":%04X", localPort)
	wantRemote := fmt.Sprintf(":%04X", remotePort)
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		if len(fields) < 10 {
			continue
		}
		if strings.HasSuffix(fields[1], wantLocal) && strings.HasSuffix(fields[2], wantRemote) {
			return fields[9]
		}
	}
	return ""
}
