package apiserver

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
	historyregistry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

// HistoryConfig turns on Event history: capture from etcd into Store, and
// the read-only history.eventapiserver.io API over it.
type HistoryConfig struct {
	Store history.Store
	// EtcdClient is capture's own client to the events etcd; closed with
	// the server, as is Store.
	EtcdClient *clientv3.Client
	// Capture's Client, Store and Decoder are filled by the server.
	Capture   capture.Config
	Retention history.Retention
}

// installHistory serves history.eventapiserver.io and starts capture and
// retention after the server starts. Neither is a readiness or liveness
// check: the Events API never waits for history (see history.RegisterMetrics).
func installHistory(server *genericapiserver.GenericAPIServer, c *HistoryConfig) error {
	decoder := Codecs.UniversalDecoder(core.SchemeGroupVersion)
	group := genericapiserver.NewDefaultAPIGroupInfo(historyapi.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	group.VersionedResourcesStorageMap[historyv1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"eventrecords": historyregistry.NewREST(c.Store, decoder),
	}
	if err := server.InstallAPIGroup(&group); err != nil {
		return err
	}

	captureConfig := c.Capture
	captureConfig.Client = c.EtcdClient
	captureConfig.Store = c.Store
	captureConfig.Decoder = decoder
	return server.AddPostStartHook("event-history", func(hookCtx genericapiserver.PostStartHookContext) error {
		history.RegisterMetrics()
		go func() {
			ctx, cancel := context.WithCancel(hookCtx)
			defer cancel()
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); capture.New(captureConfig).Run(ctx) }()
			go func() { defer wg.Done(); c.Retention.Run(ctx, c.Store) }()
			wg.Wait()
			if err := c.EtcdClient.Close(); err != nil {
				klog.ErrorS(err, "Closing the history capture's etcd client")
			}
			if err := c.Store.Close(); err != nil {
				klog.ErrorS(err, "Closing the history store")
			}
		}()
		return nil
	})
}
