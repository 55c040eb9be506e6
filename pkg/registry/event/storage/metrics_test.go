package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/component-base/metrics"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/eventmetrics"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
)

// TestWritesCounted: what the store stores is counted in
// event_apiserver_events_total as occurrences, the rise of each update
// against the Event it replaced, even when a concurrent write makes the
// update retry on the newer Event; dry runs and failed writes are not.
func TestWritesCounted(t *testing.T) {
	rules, err := ttl.Parse(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) {
			r, _, _ := newTestREST(t, rules, mode.cached)
			counter := eventmetrics.New(eventmetrics.Config{MaxSeries: 100})
			r.events = counter
			ctx := coreRequest("default")
			warning := func(name string, count int32) *core.Event {
				e := eventIn("default", name, corev1.EventTypeWarning)
				e.Reason, e.Count = "BackOff", count
				return e
			}
			update := func(name string, info rest.UpdatedObjectInfo, options *metav1.UpdateOptions) error {
				_, _, err := r.Update(ctx, name, info, rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, options)
				return err
			}
			// raise is a patch's update: the stored Event, its count raised by n.
			raise := func(n int32, before func()) rest.UpdatedObjectInfo {
				return rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, existing runtime.Object) (runtime.Object, error) {
					if before != nil {
						before()
						before = nil
					}
					e := existing.(*core.Event).DeepCopy()
					e.Count += n
					return e, nil
				})
			}
			dryRun := []string{metav1.DryRunAll}

			steps := []struct {
				what    string
				write   func() error
				wantErr bool
				total   int
			}{
				{"create, count 1", func() error {
					_, err := r.Create(ctx, warning("e1", 1), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
					return err
				}, false, 1},
				{"dry-run create", func() error {
					_, err := r.Create(ctx, warning("e2", 7), rest.ValidateAllObjectFunc, &metav1.CreateOptions{DryRun: dryRun})
					return err
				}, false, 1},
				{"create of an existing name", func() error {
					_, err := r.Create(ctx, warning("e1", 9), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
					return err
				}, true, 1},
				{"PUT to count 3", func() error {
					return update("e1", rest.DefaultUpdatedObjectInfo(warning("e1", 3)), &metav1.UpdateOptions{})
				}, false, 3},
				{"patch raising by 1", func() error { return update("e1", raise(1, nil), &metav1.UpdateOptions{}) }, false, 4},
				{"dry-run patch", func() error { return update("e1", raise(5, nil), &metav1.UpdateOptions{DryRun: dryRun}) }, false, 4},
				{"PUT with a stale resourceVersion", func() error {
					stale := warning("e1", 50)
					stale.ResourceVersion = "1"
					return update("e1", rest.DefaultUpdatedObjectInfo(stale), &metav1.UpdateOptions{})
				}, true, 4},
				{"patch of the message only", func() error {
					return update("e1", rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, existing runtime.Object) (runtime.Object, error) {
						e := existing.(*core.Event).DeepCopy()
						e.Message = "changed"
						return e, nil
					}), &metav1.UpdateOptions{})
				}, false, 4},
				{"patch raced by another writer's +2: retried on the newer Event", func() error {
					return update("e1", raise(1, func() {
						if err := update("e1", raise(2, nil), &metav1.UpdateOptions{}); err != nil {
							t.Errorf("the racing write: %v", err)
						}
					}), &metav1.UpdateOptions{})
				}, false, 7},
				{"PUT of a missing Event, count 4", func() error {
					return update("e3", rest.DefaultUpdatedObjectInfo(warning("e3", 4)), &metav1.UpdateOptions{})
				}, false, 11},
			}
			for _, step := range steps {
				err := step.write()
				if (err != nil) != step.wantErr {
					t.Fatalf("%s: error %v, want an error %v", step.what, err, step.wantErr)
				}
				want := map[string]float64{"reason=BackOff,regarding_kind=Pod,regarding_namespace=default,source=written,type=Warning": float64(step.total)}
				if got := counted(t, counter); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("after %s: counted %v, want %v", step.what, got, want)
				}
			}
			stored, err := r.Get(ctx, "e1", &metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c := stored.(*core.Event).Count; c != 7 {
				t.Errorf("e1's count is %d, want the 7 occurrences counted for it", c)
			}
		})
	}
}

// counted reads event_apiserver_events_total's samples from c, by their
// labels.
func counted(t *testing.T, c *eventmetrics.Counter) map[string]float64 {
	t.Helper()
	reg := metrics.NewKubeRegistry()
	reg.CustomMustRegister(c.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "event_apiserver_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = m.GetCounter().GetValue()
		}
	}
	return out
}
