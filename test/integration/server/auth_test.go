package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestAuthentication checks that only the kubeconfig's admin token gets in:
// no token and a wrong token both get kube's 401 Status.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	config := server.Config(t)
	admin := framework.NewRawClient(t, config, config.BearerToken)
	anonymous := framework.NewRawClient(t, config, "")
	wrongToken := framework.NewRawClient(t, config, "0"+config.BearerToken[1:]+"x")

	paths := []string{
		"/api/v1/namespaces/default/events",
		"/api/v1/events",
		"/apis/events.k8s.io/v1/namespaces/default/events",
		"/api",
		"/apis",
		"/apis/events.k8s.io/v1",
		"/openapi/v2",
		"/metrics",
	}
	tests := []struct {
		name     string
		client   *framework.RawClient
		wantCode int
	}{
		{name: "anonymous", client: anonymous, wantCode: http.StatusUnauthorized},
		{name: "wrong token", client: wrongToken, wantCode: http.StatusUnauthorized},
		{name: "admin token", client: admin, wantCode: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range paths {
				r := tc.client.Do(t, http.MethodGet, path, nil, nil)
				if r.Code != tc.wantCode {
					t.Errorf("GET %s: %d, want %d: %.200s", path, r.Code, tc.wantCode, r.Body)
					continue
				}
				if tc.wantCode != http.StatusUnauthorized {
					continue
				}
				got := r.Status(t)
				if got.Reason != metav1.StatusReasonUnauthorized || got.Message != "Unauthorized" || got.Code != 401 {
					t.Errorf("GET %s: Status %s %q %d, want Unauthorized \"Unauthorized\" 401", path, got.Reason, got.Message, got.Code)
				}
			}
			// Writes are refused the same way.
			r := tc.client.Do(t, http.MethodPost, framework.CoreEventsPath, framework.CoreBody(framework.UniqueName("auth"), nil),
				map[string]string{"Content-Type": framework.ContentJSON})
			wantCode := tc.wantCode
			if wantCode == http.StatusOK {
				wantCode = http.StatusCreated
			}
			if r.Code != wantCode {
				t.Errorf("POST %s: %d, want %d: %.200s", framework.CoreEventsPath, r.Code, wantCode, r.Body)
			}
		})
	}
}

// TestListensOnLoopbackOnly checks the server's listening sockets in
// /proc/net/tcp{,6}: the secure port and the embedded etcd's client port are
// bound to 127.0.0.1, and nothing listens on a wildcard or external address.
func TestListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	etcdPort := framework.FreePort(t)
	server := framework.StartServer(t, framework.ServerOptions{EmbeddedEtcdPort: etcdPort})
	u, err := url.Parse(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	securePort, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}

	pid, err := framework.FindServerPID(server.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	listeners, err := listeningSockets(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(listeners) == 0 {
		t.Fatalf("process %d has no listening TCP sockets", pid)
	}
	t.Logf("process %d listens on %v", pid, listeners)
	ports := map[int]bool{}
	for _, l := range listeners {
		ports[l.Port] = true
		if !l.IP.IsLoopback() {
			t.Errorf("process %d listens on %s, want loopback only", pid, net.JoinHostPort(l.IP.String(), strconv.Itoa(l.Port)))
		}
	}
	for name, port := range map[string]int{"secure port": securePort, "embedded etcd client port": etcdPort} {
		if !ports[port] {
			t.Errorf("%s %d is not among the listening sockets %v", name, port, listeners)
		}
	}

	// From a non-loopback address of this machine, if it has one, the
	// ports must refuse connections.
	ip := nonLoopbackIPv4()
	if ip == nil {
		t.Logf("no non-loopback IPv4 address here; checked /proc only")
		return
	}
	for _, port := range []int{securePort, etcdPort} {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
		conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err == nil {
			_ = conn.Close()
			t.Errorf("connected to %s: the server must not be reachable off loopback", addr)
		}
	}
}

type listener struct {
	IP   net.IP
	Port int
}

func (l listener) String() string { return net.JoinHostPort(l.IP.String(), strconv.Itoa(l.Port)) }

// listeningSockets is the process's TCP sockets in state LISTEN, from its
// file descriptors matched against /proc/<pid>/net/tcp and tcp6.
func listeningSockets(pid int) ([]listener, error) {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []listener
	for _, table := range []string{"tcp", "tcp6"} {
		ls, err := parseProcNetTCP(fmt.Sprintf("/proc/%d/net/%s", pid, table), inodes)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// parseProcNetTCP reads LISTEN (state 0A) entries whose inode is wanted.
// Lines look like: "0: 0100007F:1F90 00000000:0000 0A ... <uid> <timeout> <inode> ...".
func parseProcNetTCP(path string, inodes map[string]bool) ([]listener, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []listener
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
			continue
		}
		hostHex, portHex, ok := strings.Cut(fields[1], ":")
		if !ok {
			return nil, fmt.Errorf("%s: bad address %q", path, fields[1])
		}
		ip, err := decodeProcIP(hostHex)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("%s: bad port %q", path, portHex)
		}
		out = append(out, listener{IP: ip, Port: int(port)})
	}
	return out, sc.Err()
}

// decodeProcIP decodes /proc/net/tcp's hex address: 32-bit words in host
// (little-endian) byte order.
func decodeProcIP(h string) (net.IP, error) {
	if len(h) != 8 && len(h) != 32 {
		return nil, fmt.Errorf("bad address %q", h)
	}
	ip := make(net.IP, len(h)/2)
	for word := 0; word < len(h)/8; word++ {
		for b := 0; b < 4; b++ {
			v, err := strconv.ParseUint(h[word*8+b*2:word*8+b*2+2], 16, 8)
			if err != nil {
				return nil, fmt.Errorf("bad address %q", h)
			}
			ip[word*4+3-b] = byte(v)
		}
	}
	return ip, nil
}

// nonLoopbackIPv4 is an IPv4 address of this machine other than loopback.
func nonLoopbackIPv4() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP
		}
	}
	return nil
}
