package etcdclient

import "testing"

func TestAbandonedDial(t *testing.T) {
	for msg, want := range map[string]bool{
		`[core] [Channel #1 SubChannel #2] grpc: addrConn.createTransport failed to connect to {Addr: "events-etcd-client.event-apiserver.svc:2379", ServerName: "events-etcd-client.event-apiserver.svc:2379", }. Err: connection error: desc = "transport: Error while dialing: dial tcp: lookup events-etcd-client.event-apiserver.svc: operation was canceled"`: true,
		`[core] [Channel #13 SubChannel #14] grpc: addrConn.createTransport failed to connect to {Addr: "localhost:23791", ServerName: "localhost:23791", }. Err: connection error: desc = "error reading server preface: read tcp 127.0.0.1:39370->127.0.0.1:23791: use of closed network connection"`:                                                             true,
		`[core] [Channel #4 SubChannel #5] grpc: addrConn.createTransport failed to connect to {Addr: "127.0.0.1:46397", ServerName: "127.0.0.1:46397", }. Err: connection error: desc = "transport: authentication handshake failed: context canceled"`:                                                                                                            true,
		`[core] [Channel #18 SubChannel #20] grpc: addrConn.createTransport failed to connect to {Addr: "127.0.0.1:39875", ServerName: "127.0.0.1:39875", }. Err: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:39875: connect: connection refused"`:                                                                                 false,
		`[core] [Channel #5 SubChannel #7] grpc: addrConn.createTransport failed to connect to {Addr: "etcd:2379"}. Err: connection error: desc = "transport: Error while dialing: dial tcp: lookup etcd: no such host"`:                                                                                                                                            false,
		`[core] [Channel #5 SubChannel #7] grpc: addrConn.createTransport failed to connect to {Addr: "etcd:2379"}. Err: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`:                                                                                   false,
	} {
		if got := abandonedDial(msg); got != want {
			t.Errorf("abandonedDial(%q) = %v, want %v", msg, got, want)
		}
	}
}
