package etcdclient

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/kubernetes"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/server/egressselector"
	etcd3testing "k8s.io/apiserver/pkg/storage/etcd3/testing"
	"k8s.io/apiserver/pkg/storage/storagebackend"
)

// TestNew dials a real (embedded) etcd as each caller's settings say, and
// refuses TLS files it cannot load.
func TestNew(t *testing.T) {
	_, storageConfig := etcd3testing.NewUnsecuredEtcd3TestClientServer(t)
	var egressDials atomic.Int32
	egress := func(nc egressselector.NetworkContext) (utilnet.DialFunc, error) {
		if nc.EgressSelectionName != egressselector.Etcd {
			t.Errorf("egress lookup for %v, want etcd", nc.EgressSelectionName)
		}
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			egressDials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}, nil
	}
	missing := filepath.Join(t.TempDir(), "missing.crt")

	cases := []struct {
		name       string
		transport  storagebackend.TransportConfig
		opts       []Option
		wantErr    string
		wantEgress bool
	}{
		{name: "plain", transport: storageConfig.Transport},
		{name: "short dial timeout", transport: storageConfig.Transport, opts: []Option{WithDialTimeout(time.Second)}},
		{
			name:       "egress selector",
			transport:  storagebackend.TransportConfig{ServerList: storageConfig.Transport.ServerList, EgressLookup: egress},
			wantEgress: true,
		},
		{
			name:      "unreadable CA file",
			transport: storagebackend.TransportConfig{ServerList: storageConfig.Transport.ServerList, TrustedCAFile: missing},
			wantErr:   "missing.crt",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			egressDials.Store(0)
			client, err := New(tc.transport, tc.opts...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = client.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := "/etcdclient-test/" + tc.name
			if _, err := client.Put(ctx, key, "v"); err != nil {
				t.Fatal(err)
			}
			resp, err := client.Get(ctx, key)
			if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
				t.Fatalf("Get: %v %v", resp, err)
			}
			if got := egressDials.Load() > 0; got != tc.wantEgress {
				t.Errorf("dialed through the egress selector: %v, want %v", got, tc.wantEgress)
			}
		})
	}
}

// TestNewKubernetes: the etcd3 store's client wrapper reads what it wrote.
func TestNewKubernetes(t *testing.T) {
	_, storageConfig := etcd3testing.NewUnsecuredEtcd3TestClientServer(t)
	client, err := NewKubernetes(storageConfig.Transport)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	if got, err := client.Kubernetes.Get(ctx, "/k", kubernetes.GetOptions{}); err != nil || got.KV == nil || string(got.KV.Value) != "v" {
		t.Fatalf("Get: %+v %v", got, err)
	}
}
