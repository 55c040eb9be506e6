package capture

import (
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apiserver/pkg/storage/storagebackend"
)

// NewClient dials the events etcd for capture with the storage's endpoints
// and TLS files. Capture has a client of its own so that its watch, which
// may stop being read under back-pressure, shares no stream with the
// watch cache's.
func NewClient(config storagebackend.TransportConfig) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   config.ServerList,
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	}
	if config.CertFile != "" || config.KeyFile != "" || config.TrustedCAFile != "" {
		tlsConfig, err := (transport.TLSInfo{
			CertFile:      config.CertFile,
			KeyFile:       config.KeyFile,
			TrustedCAFile: config.TrustedCAFile,
		}).ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tlsConfig
	}
	return clientv3.New(cfg)
}
