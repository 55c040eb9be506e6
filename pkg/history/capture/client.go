package capture

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
)

// NewClient dials the events etcd for capture as the storage does. Capture
// has a client of its own so that its watch, which may stop being read under
// back-pressure, shares no stream with the watch cache's.
func NewClient(config storagebackend.TransportConfig) (*clientv3.Client, error) {
	return etcdclient.New(config, etcdclient.WithDialTimeout(10*time.Second))
}
