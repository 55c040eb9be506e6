package events

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestConversionAcrossAPIs writes Events through one API and reads them
// through the other with typed clients: every field must arrive under its
// name in the other version (regarding↔involvedObject, note↔message,
// deprecatedSource↔source, deprecated timestamps and count, series, related,
// action, reporting*, eventTime), and metadata must be the same object.
func TestConversionAcrossAPIs(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	client := server.Client(t)
	const ns = "conversion"

	oldCore := framework.FullCoreEvent(ns, "old-core")
	// A core/v1 Event as tools/record writes it: no eventTime, series,
	// action or related.
	oldCore.EventTime = metav1.MicroTime{}
	oldCore.Series = nil
	oldCore.Action = ""
	oldCore.Related = nil

	singleton := framework.FullEventsV1Event(ns, "singleton")
	// What tools/events writes first: no series yet.
	singleton.Series = nil

	tests := []struct {
		name string
		// write creates the Event through one API and returns the server's
		// answer converted to both versions by the oracle.
		write func(ctx context.Context, c kubernetes.Interface) (*corev1.Event, *eventsv1.Event, error)
	}{
		{
			name: "core/v1 with every field, read as events.k8s.io/v1",
			write: func(ctx context.Context, c kubernetes.Interface) (*corev1.Event, *eventsv1.Event, error) {
				created, err := c.CoreV1().Events(ns).Create(ctx, framework.FullCoreEvent(ns, "full-core"), metav1.CreateOptions{})
				if err != nil {
					return nil, nil, err
				}
				return created, framework.EventsV1FromCore(created), nil
			},
		},
		{
			name: "core/v1 legacy recorder shape, read as events.k8s.io/v1",
			write: func(ctx context.Context, c kubernetes.Interface) (*corev1.Event, *eventsv1.Event, error) {
				created, err := c.CoreV1().Events(ns).Create(ctx, oldCore, metav1.CreateOptions{})
				if err != nil {
					return nil, nil, err
				}
				return created, framework.EventsV1FromCore(created), nil
			},
		},
		{
			name: "events.k8s.io/v1 with every field, read as core/v1",
			write: func(ctx context.Context, c kubernetes.Interface) (*corev1.Event, *eventsv1.Event, error) {
				created, err := c.EventsV1().Events(ns).Create(ctx, framework.FullEventsV1Event(ns, "full-events"), metav1.CreateOptions{})
				if err != nil {
					return nil, nil, err
				}
				return framework.CoreFromEventsV1(created), created, nil
			},
		},
		{
			name: "events.k8s.io/v1 singleton, read as core/v1",
			write: func(ctx context.Context, c kubernetes.Interface) (*corev1.Event, *eventsv1.Event, error) {
				created, err := c.EventsV1().Events(ns).Create(ctx, singleton, metav1.CreateOptions{})
				if err != nil {
					return nil, nil, err
				}
				return framework.CoreFromEventsV1(created), created, nil
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			wantCore, wantEvents, err := tc.write(ctx, client)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			name := wantCore.Name

			gotCore, err := client.CoreV1().Events(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get core/v1: %v", err)
			}
			gotEvents, err := client.EventsV1().Events(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get events.k8s.io/v1: %v", err)
			}
			assertSameCoreEvent(t, "core/v1 GET", wantCore, gotCore)
			assertSameEventsV1Event(t, "events.k8s.io/v1 GET", wantEvents, gotEvents)

			// Lists go through the watch cache; they must convert the same way.
			coreList, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			if err != nil {
				t.Fatalf("list core/v1: %v", err)
			}
			eventsList, err := client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			if err != nil {
				t.Fatalf("list events.k8s.io/v1: %v", err)
			}
			if len(coreList.Items) != 1 || len(eventsList.Items) != 1 {
				t.Fatalf("lists by name: %d core/v1 and %d events.k8s.io/v1 items, want 1 and 1",
					len(coreList.Items), len(eventsList.Items))
			}
			assertSameCoreEvent(t, "core/v1 LIST", wantCore, &coreList.Items[0])
			assertSameEventsV1Event(t, "events.k8s.io/v1 LIST", wantEvents, &eventsList.Items[0])
		})
	}
}

func assertSameCoreEvent(t *testing.T, what string, want, got *corev1.Event) {
	t.Helper()
	want, got = want.DeepCopy(), got.DeepCopy()
	want.TypeMeta, got.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
	if !apiequality.Semantic.DeepEqual(want, got) {
		t.Errorf("%s: core/v1 Event differs (-want +got):\n%s", what, diff.Diff(want, got))
	}
}

func assertSameEventsV1Event(t *testing.T, what string, want, got *eventsv1.Event) {
	t.Helper()
	want, got = want.DeepCopy(), got.DeepCopy()
	want.TypeMeta, got.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
	if !apiequality.Semantic.DeepEqual(want, got) {
		t.Errorf("%s: events.k8s.io/v1 Event differs (-want +got):\n%s", what, diff.Diff(want, got))
	}
}
