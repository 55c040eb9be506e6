package capture_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
)

// TestCaptureSources: an etcd source and a Kubernetes API source capture
// side by side into one store, each through a Capture of its own, as a
// fleet's member clusters would. Each stores every version it was given
// under its own progress key; each source's metrics, labelled by its name,
// count its own and leave the other's alone; one readiness check covers
// both; and once the captures stop, their series are gone from /metrics.
func TestCaptureSources(t *testing.T) {
	ctx := context.Background()
	client := embeddedEtcd(t)
	k := newKubeCaptureTest(t)
	etcdSource := capture.NewEtcdSource(capture.EtcdConfig{Client: client, Prefix: prefix})
	kubeSource := capture.NewKubernetesSource(capture.KubernetesConfig{Client: k.client})
	config := capture.Config{
		Store:         k.store,
		Decoder:       apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion),
		BatchSize:     7,
		BatchInterval: 10 * time.Millisecond,
	}
	captures := []*capture.Capture{capture.New(etcdSource, config), capture.New(kubeSource, config)}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range captures {
		wg.Add(1)
		go func() { defer wg.Done(); c.Run(runCtx) }()
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	defer stop()

	const etcdVersions, kubeVersions = 30, 20
	var etcdRev int64
	for i := 0; i < etcdVersions; i++ {
		etcdRev = putEvent(ctx, t, client, fmt.Sprint("e", i%10), int32(i/10+1))
	}
	for i := 0; i < kubeVersions; i++ {
		k.api.write(fmt.Sprint("k", i%5), 100)
	}
	etcdKey, err := etcdSource.ProgressKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if etcdKey == capture.KubernetesProgressKey {
		t.Fatalf("both sources keep their progress under %q", etcdKey)
	}
	want := map[string]struct {
		key             string
		revision        int64
		versionsWritten float64
	}{
		"etcd":       {key: etcdKey, revision: etcdRev, versionsWritten: etcdVersions},
		"kubernetes": {key: capture.KubernetesProgressKey, revision: k.api.rv, versionsWritten: kubeVersions},
	}
	for source, w := range want {
		// The gauge is set once the batch is stored: poll it too.
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			stored, ok, err := k.store.Progress(ctx, w.key)
			return err == nil && ok && stored == w.revision && gauge(t, history.CapturedRevision, source) == float64(w.revision), nil
		})
		if err != nil {
			stored, _, _ := k.store.Progress(ctx, w.key)
			t.Fatalf("%s: progress %d and capture_revision %v, want both %d", source, stored, gauge(t, history.CapturedRevision, source), w.revision)
		}
		if got := counterOf(t, history.VersionsWritten, source); got != w.versionsWritten {
			t.Errorf("%s: versions_written_total %v, want %v", source, got, w.versionsWritten)
		}
		if got := gauge(t, history.LagRevisions, source); got != 0 {
			t.Errorf("%s: capture_lag_revisions %v once all is stored", source, got)
		}
	}
	if got := len(k.versions()); got != etcdVersions+kubeVersions {
		t.Errorf("the store holds %d versions, want %d", got, etcdVersions+kubeVersions)
	}
	if err := capture.ReadyzCheck(captures...).Check(nil); err != nil {
		t.Errorf("readiness of both: %v", err)
	}

	stop()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if _, ok := want[l.GetValue()]; ok && l.GetName() == history.SourceLabel {
					t.Errorf("%s{%s=%q} is still there after its capture stopped", f.GetName(), history.SourceLabel, l.GetValue())
				}
			}
		}
	}
}

// gauge reads one source's series of a capture gauge.
func gauge(t *testing.T, vec *metrics.GaugeVec, source string) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(vec.WithLabelValues(source))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// counterOf reads one source's series of a capture counter.
func counterOf(t *testing.T, vec *metrics.CounterVec, source string) float64 {
	t.Helper()
	return counter(t, vec.WithLabelValues(source))
}
