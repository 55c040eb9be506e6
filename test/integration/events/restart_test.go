package events

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestRestartKeepsEvents restarts a server with its embedded etcd on the
// same data directory: Events written through both APIs before the restart
// are all there after it, unchanged, and the kubeconfig handed out before
// still works.
func TestRestartKeepsEvents(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	client := server.Client(t)
	ctx := context.Background()
	const ns = "restart"

	var coreBefore []corev1.Event
	var eventsBefore []eventsv1.Event
	for _, name := range []string{"a", "b", "c"} {
		e, err := client.CoreV1().Events(ns).Create(ctx, framework.FullCoreEvent(ns, "core-"+name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		coreBefore = append(coreBefore, *e)
		ev, err := client.EventsV1().Events(ns).Create(ctx, framework.FullEventsV1Event(ns, "events-"+name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventsBefore = append(eventsBefore, *ev)
	}
	// One Event updated after its create, so the restart must keep the
	// latest write.
	patched, err := client.CoreV1().Events(ns).Patch(ctx, "core-a", "application/merge-patch+json",
		[]byte(`{"count":11,"message":"updated before restart"}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	coreBefore[0] = *patched

	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	// The client from before the restart, with the same token and CA.
	for _, want := range coreBefore {
		got, err := client.CoreV1().Events(ns).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("core/v1 GET %s after restart: %v", want.Name, err)
			continue
		}
		assertSameCoreEvent(t, want.Name+" after restart", &want, got)
	}
	for _, want := range eventsBefore {
		got, err := client.EventsV1().Events(ns).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("events.k8s.io/v1 GET %s after restart: %v", want.Name, err)
			continue
		}
		assertSameEventsV1Event(t, want.Name+" after restart", &want, got)
	}
	list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(list.Items), len(coreBefore)+len(eventsBefore); got != want {
		t.Errorf("list after restart has %d Events, want %d", got, want)
	}
	// The server still writes after the restart.
	if _, err := client.CoreV1().Events(ns).Create(ctx, framework.FullCoreEvent(ns, "after"), metav1.CreateOptions{}); err != nil {
		t.Errorf("create after restart: %v", err)
	}
}
