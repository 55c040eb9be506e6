package apiserver

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
	"github.com/eventapiserver/event-apiserver/pkg/history/fleet"
	historyregistry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

// HistoryConfig turns on Event history: capture from its sources into
// Store, and the read-only history.eventapiserver.io API over it.
type HistoryConfig struct {
	Store history.Store
	// Sources are what capture reads Events from (the events etcd, or
	// kube-apiserver's API for the history-only server): one capture each,
	// with a queue of its own, so that none holds up another, all into
	// Store. Their names are unique. A source that implements io.Closer is
	// closed with the server once its capture stopped, as is Store.
	Sources []capture.Source
	// Capture tunes each source's queue and writer; its Store and Decoder
	// are filled by the server.
	Capture   capture.Config
	Retention history.Retention
	// Feed tunes the eventrecords watch; zero values take its defaults.
	Feed historyregistry.FeedConfig
	// Limits bound each eventrecords query; zero values take the defaults.
	Limits historyregistry.Limits
	// Cluster names the server's own cluster: the cluster of the versions
	// its Sources capture (stored as "", history.ColumnCluster).
	Cluster string
	// Fleet, when set, captures the member clusters of a fleet beside
	// Sources, each into Store under its own cluster name. Members come and
	// go while the server runs; none is part of the server's readiness.
	Fleet *fleet.Fleet
	// Count bounds eventrecordcounts; zero values take its defaults.
	Count historyregistry.CountConfig
}

// installHistory serves history.eventapiserver.io and starts capture and
// retention after the server starts. Neither is a readiness or liveness
// check: the Events API never waits for history (see history.RegisterMetrics).
// The one exception is a store whose schema a newer server migrated
// (history.SchemaCheck): a replica left behind by a rolling upgrade.
//
// authz authorizes each requester's clusters on a fleet's hub (c.Fleet).
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
func installHistory(server *genericapiserver.GenericAPIServer, c *HistoryConfig, authz authorizer.Authorizer, cacheReady func() error, cacheWait time.Duration, ready bool) error {
	decoder := Codecs.UniversalDecoder(core.SchemeGroupVersion)
	captureConfig := c.Capture
	captureConfig.Store = c.Store
	captureConfig.Decoder = decoder
	captures := make([]*capture.Capture, 0, len(c.Sources))
	names := sets.New[string]()
	for _, source := range c.Sources {
		// The name is the metrics' source label: two sources under one
		// name would write one series.
		if name := source.Name(); name == "" || names.Has(name) {
			return fmt.Errorf("history capture sources need unique names, not %q", name)
		}
		names.Insert(source.Name())
		captures = append(captures, capture.New(source, captureConfig))
	}

	feed := c.Feed
	feed.Cluster = c.Cluster
	if c.Fleet != nil {
		// A hub: which clusters' records each person reads is authorized
		// per cluster (historyregistry.ClustersResource).
		feed.Clusters = authz
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(historyapi.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	records := historyregistry.NewREST(c.Store, decoder, feed)
	group.VersionedResourcesStorageMap[historyv1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"eventrecords": records.WithLimits(c.Limits),
	}
	if counter, ok := c.Store.(history.Counter); ok {
		countResources(group.VersionedResourcesStorageMap[historyv1alpha1.SchemeGroupVersion.Version], counter, records, authz, c.Count)
	}
	if err := server.InstallAPIGroup(&group); err != nil {
		return err
	}
	if err := server.AddReadyzChecks(history.SchemaCheck(c.Store)); err != nil {
		return err
	}
	if ready {
		// The server's own Sources only: a fleet's member captures are
		// not, so that one member down never makes the hub unready.
		if err := server.AddReadyzChecks(capture.ReadyzCheck(captures...)); err != nil {
			return err
		}
		if c.Fleet != nil {
			if err := server.AddReadyzChecks(c.Fleet.ReadyzCheck()); err != nil {
				return err
			}
		}
	}
	return server.AddPostStartHook("event-history", func(hookCtx genericapiserver.PostStartHookContext) error {
		history.RegisterMetrics()
		go func() {
			ctx, cancel := context.WithCancel(hookCtx)
			defer cancel()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); c.Retention.Run(ctx, c.Store) }()
			if waitFor(ctx, cacheReady, cacheWait) {
				for _, capturer := range captures {
					wg.Add(1)
					go func() { defer wg.Done(); capturer.Run(ctx) }()
				}
				if c.Fleet != nil {
					wg.Add(1)
					go func() { defer wg.Done(); c.Fleet.Run(ctx, captureConfig) }()
				}
			}
			wg.Wait()
			for _, source := range c.Sources {
				if closer, ok := source.(io.Closer); ok {
					if err := closer.Close(); err != nil {
						klog.ErrorS(err, "Closing a history capture source", "source", source.Name())
					}
				}
			}
			if err := c.Store.Close(); err != nil {
				klog.ErrorS(err, "Closing the history store")
			}
		}()
		return nil
	})
}

// installHistoryOff serves history.eventapiserver.io while history is off,
// every request answered with how to turn it on (historyregistry.Off).
func installHistoryOff(server *genericapiserver.GenericAPIServer, authz authorizer.Authorizer) error {
	group := genericapiserver.NewDefaultAPIGroupInfo(historyapi.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	group.VersionedResourcesStorageMap[historyv1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"eventrecords": historyregistry.Off{},
	}
	countResources(group.VersionedResourcesStorageMap[historyv1alpha1.SchemeGroupVersion.Version], nil, nil, authz, historyregistry.CountConfig{})
	return server.InstallAPIGroup(&group)
}

// countResources adds the count resources: one namespace's, and all
// namespaces', as LocalSubjectAccessReview and SubjectAccessReview are
// a pair. A nil counter answers Off's 404.
func countResources(storage map[string]rest.Storage, counter history.Counter, records *historyregistry.REST, authz authorizer.Authorizer, config historyregistry.CountConfig) {
	storage["eventrecordcounts"] = historyregistry.NewCountREST(counter, records, authz, Scheme, false, config)
	storage["clustereventrecordcounts"] = historyregistry.NewCountREST(counter, records, authz, Scheme, true, config)
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
