package apiserver

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
	historyregistry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

// HistoryConfig turns on Event history: capture from etcd or from
// kube-apiserver into Store, and the read-only history.eventapiserver.io API
// over it.
type HistoryConfig struct {
	Store history.Store
	// EtcdClient is capture's own client to the events etcd; closed with
	// the server, as is Store.
	EtcdClient *clientv3.Client
	// KubeClient, in place of EtcdClient, captures Events from
	// kube-apiserver's API (the history-only server).
	KubeClient kubernetes.Interface
	// Capture's Client, Store and Decoder are filled by the server.
	Capture   capture.Config
	Retention history.Retention
	// Feed tunes the eventrecords watch; zero values take its defaults.
	Feed historyregistry.FeedConfig
}

// installHistory serves history.eventapiserver.io and starts capture and
// retention after the server starts. Neither is a readiness or liveness
// check: the Events API never waits for history (see history.RegisterMetrics).
//
// With ready, capture's readiness (its store answers, its starting point is
// stored) is a /readyz check: the history-only server serves nothing else.
//
// Capture starts once cacheReady, the Events watch cache's readiness, holds,
// or after cacheWait (the limit /readyz waits for that cache), whichever comes
// first: on a restart over a large store, capture's relist or catch-up
// (decoding every Event again, SQLite writes) competed for CPU with the
// cacher's initial LIST and delayed the first LIST served. Capture loses
// nothing by starting later: it resumes from its stored revision, which etcd
// keeps until a compaction, and relists if etcd compacted past it.
func installHistory(server *genericapiserver.GenericAPIServer, c *HistoryConfig, cacheReady func() error, cacheWait time.Duration, ready bool) error {
	decoder := Codecs.UniversalDecoder(core.SchemeGroupVersion)
	group := genericapiserver.NewDefaultAPIGroupInfo(historyapi.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	group.VersionedResourcesStorageMap[historyv1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"eventrecords": historyregistry.NewREST(c.Store, decoder, c.Feed),
	}
	if err := server.InstallAPIGroup(&group); err != nil {
		return err
	}

	captureConfig := c.Capture
	captureConfig.Client = c.EtcdClient
	captureConfig.Kubernetes = c.KubeClient
	captureConfig.Store = c.Store
	captureConfig.Decoder = decoder
	capturer := capture.New(captureConfig)
	if ready {
		if err := server.AddReadyzChecks(capturer.ReadyzCheck()); err != nil {
			return err
		}
	}
	return server.AddPostStartHook("event-history", func(hookCtx genericapiserver.PostStartHookContext) error {
		history.RegisterMetrics()
		go func() {
			ctx, cancel := context.WithCancel(hookCtx)
			defer cancel()
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				if waitFor(ctx, cacheReady, cacheWait) {
					capturer.Run(ctx)
				}
			}()
			go func() { defer wg.Done(); c.Retention.Run(ctx, c.Store) }()
			wg.Wait()
			if c.EtcdClient != nil {
				if err := c.EtcdClient.Close(); err != nil {
					klog.ErrorS(err, "Closing the history capture's etcd client")
				}
			}
			if err := c.Store.Close(); err != nil {
				klog.ErrorS(err, "Closing the history store")
			}
		}()
		return nil
	})
}

// waitFor polls ready until it holds or limit passes, and reports whether to
// go on (false only when ctx ended).
func waitFor(ctx context.Context, ready func() error, limit time.Duration) bool {
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, limit, true, func(context.Context) (bool, error) {
		return ready() == nil, nil
	})
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		klog.InfoS("Starting Event history capture before the Events watch cache is ready", "waited", limit)
	} else {
		klog.V(2).InfoS("Events watch cache ready, starting Event history capture", "waited", time.Since(start).Round(time.Millisecond))
	}
	return true
}
