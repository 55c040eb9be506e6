// Package etcdclient dials etcd the way k8s.io/apiserver's etcd3 storage
// does (storagebackend/factory/etcd3.go newETCD3Client): the endpoints of
// --etcd-servers (unix:// sockets included), the TLS files of --etcd-cafile,
// --etcd-certfile and --etcd-keyfile, the egress selector's dialer, and its
// dial timeout and keepalives. Every etcd client the server opens besides the
// storage's own is made here, so that they all reach the etcd the storage
// reaches, the same way.
package etcdclient

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/apiserver/pkg/server/egressselector"
	"k8s.io/apiserver/pkg/storage/storagebackend"
)

// The values k8s.io/apiserver's etcd3 storage factory dials with.
const (
	DialTimeout      = 20 * time.Second
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
)

// Option adjusts the client configuration for one use (a shorter dial
// timeout, a reconnection backoff).
type Option func(*clientv3.Config)

// WithDialTimeout replaces DialTimeout.
func WithDialTimeout(d time.Duration) Option {
	return func(c *clientv3.Config) { c.DialTimeout = d }
}

// WithDialOptions adds gRPC dial options.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *clientv3.Config) { c.DialOptions = append(c.DialOptions, opts...) }
}

// New dials etcd as the storage transport says. It does not wait for a
// connection (no grpc.WithBlock, unlike the storage's client): callers
// probe, retry or time out on their own requests.
func New(c storagebackend.TransportConfig, opts ...Option) (*clientv3.Client, error) {
	cfg, err := config(c, opts)
	if err != nil {
		return nil, err
	}
	return clientv3.New(cfg)
}

// NewKubernetes is New for an etcd3 store (k8s.io/apiserver storage/etcd3.New
// takes the kubernetes client wrapper).
func NewKubernetes(c storagebackend.TransportConfig, opts ...Option) (*kubernetes.Client, error) {
	cfg, err := config(c, opts)
	if err != nil {
		return nil, err
	}
	return kubernetes.New(cfg)
}

func config(c storagebackend.TransportConfig, opts []Option) (clientv3.Config, error) {
	cfg := clientv3.Config{
		Endpoints:            c.ServerList,
		DialTimeout:          DialTimeout,
		DialKeepAliveTime:    KeepaliveTime,
		DialKeepAliveTimeout: KeepaliveTimeout,
		// Callers log failures once, in their own words, not every retry.
		Logger: zap.NewNop(),
		// The balancer the etcd client's resolver switches to anyway: with
		// gRPC's default (pick_first) first, the switch abandons the first
		// connection attempt, which gRPC logs as a warning
		// (QuietAbandonedDials).
		DialOptions: []grpc.DialOption{grpc.WithDefaultServiceConfig(`{"loadBalancingPolicy":"round_robin"}`)},
	}
	// The client takes a nil TLS config for plain connections.
	if c.CertFile != "" || c.KeyFile != "" || c.TrustedCAFile != "" {
		tlsConfig, err := (transport.TLSInfo{
			CertFile:      c.CertFile,
			KeyFile:       c.KeyFile,
			TrustedCAFile: c.TrustedCAFile,
		}).ClientConfig()
		if err != nil {
			return clientv3.Config{}, err
		}
		cfg.TLS = tlsConfig
	}
	if c.EgressLookup != nil {
		dial, err := c.EgressLookup(egressselector.Etcd.AsNetworkContext())
		if err != nil {
			return clientv3.Config{}, err
		}
		if dial != nil {
			cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				// As newETCD3Client: older clients passed URLs to the dialer.
				if strings.Contains(addr, "//") {
					u, err := url.Parse(addr)
					if err != nil {
						return nil, err
					}
					addr = u.Host
				}
				return dial(ctx, "tcp", addr)
			}))
		}
	}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg, nil
}
