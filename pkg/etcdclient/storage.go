package etcdclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdmetrics "k8s.io/apiserver/pkg/storage/etcd3/metrics"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// NewRawStorage builds the etcd3 store generic.NewRawStorage builds
// (k8s.io/apiserver storagebackend/factory newETCD3Storage: the same store,
// compactor, latency tracking, transformer, decoder and database size
// metric) on a client that does not wait for etcd.
//
// The factory dials the store's client and its compactor's with
// grpc.WithBlock and gives up after 20 s, so a server started while etcd is
// down fails to build its storage and exits, as kube-apiserver does
// (`creating Event storage: context deadline exceeded`), and the kubelet
// restarts it with a back-off until etcd answers. On this client the server
// starts at once: it serves what needs no etcd (history, health), the
// watch cache fills as soon as etcd answers, and until then /readyz's
// etcd-writes and watch-cache checks fail.
//
// Left out: the factory's gRPC client metrics and tracing interceptors,
// which it keeps to itself.
func NewRawStorage(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error) {
	switch config.Type {
	case storagebackend.StorageTypeUnset, storagebackend.StorageTypeETCD3:
	default:
		return nil, nil, fmt.Errorf("storage type %q is not supported", config.Type)
	}
	client, err := NewKubernetes(config.Transport)
	if err != nil {
		return nil, nil, err
	}
	client.KV = etcd3.NewETCDLatencyTracker(client.KV)

	// One compactor per etcd, however many stores (StartCompactorPerEndpoint
	// hands out the running one), as the factory's.
	var compactor etcd3.Compactor
	stopCompactor := func() {}
	if config.CompactionInterval > 0 {
		c := etcd3.StartCompactorPerEndpoint(client.Client, config.CompactionInterval)
		compactor, stopCompactor = c, c.Stop
	}
	stopDBSizeMonitor := startDBSizeMonitor(client.Client.Maintenance, client.Endpoints(), config.DBMetricPollInterval)

	versioner := storage.APIObjectVersioner{}
	transformer, decoder := TransformerAndDecoder(config, versioner)
	store, err := etcd3.New(client, compactor, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix,
		config.GroupResource, transformer, config.LeaseManagerConfig, decoder, versioner)
	if err != nil {
		stopCompactor()
		stopDBSizeMonitor()
		_ = client.Close()
		return nil, nil, err
	}
	var once sync.Once
	destroy := func() {
		once.Do(func() {
			stopCompactor()
			stopDBSizeMonitor()
			store.Close()
			_ = client.Close()
		})
	}
	var s storage.Interface = store
	if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.AllowUnsafeMalformedObjectDeletion) {
		s = etcd3.NewStoreWithUnsafeCorruptObjectDeletion(s, config.GroupResource)
	}
	return s, destroy, nil
}

// TransformerAndDecoder are the value transformer and decoder an etcd3
// store of config uses, as the factory picks them: every store writing
// the same keys must read and write the same bytes.
func TransformerAndDecoder(config *storagebackend.ConfigForResource, versioner storage.Versioner) (value.Transformer, etcd3.Decoder) {
	transformer := config.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	decoder := etcd3.NewDefaultDecoder(config.Codec, versioner)
	if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.AllowUnsafeMalformedObjectDeletion) {
		transformer = etcd3.WithCorruptObjErrorHandlingTransformer(transformer)
		decoder = etcd3.WithCorruptObjErrorHandlingDecoder(decoder)
	}
	return transformer, decoder
}

// startDBSizeMonitor keeps the deprecated apiserver_storage_db_total_size_in_bytes
// gauge as the factory does (-1 while an endpoint does not answer), every
// --etcd-db-metric-poll-interval; zero turns it off.
func startDBSizeMonitor(m clientv3.Maintenance, endpoints []string, interval time.Duration) func() {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, ep := range endpoints {
		go wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
			sctx, scancel := context.WithTimeout(ctx, interval)
			defer scancel()
			status, err := m.Status(sctx, ep)
			if err != nil {
				etcdmetrics.UpdateEtcdDbSize(ep, -1)
				return
			}
			etcdmetrics.UpdateEtcdDbSize(ep, status.DbSize)
		}, interval, 0.5, true)
	}
	return cancel
}
