package workload

import (
	"fmt"
	"hash/fnv"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Events the workloads write look like the ones kubelet (core/v1,
// tools/record) and kube-scheduler (events.k8s.io/v1, tools/events) write:
// same fields set, same name scheme (<object>.<hex unix nanos>), messages of
// realistic length.

// podUID is a stable UID for the pod named name in namespace ns.
func podUID(ns, name string) types.UID {
	h := fnv.New64a()
	_, _ = h.Write([]byte(ns + "/" + name))
	s := h.Sum64()
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(s>>32), uint16(s>>16), uint16(s)&0xfff, uint16(s>>4)&0xfff, s&0xffffffffffff))
}

func podRef(ns, name string) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind: "Pod", Namespace: ns, Name: name, UID: podUID(ns, name),
		APIVersion: "v1", ResourceVersion: "4242", FieldPath: "spec.containers{app}",
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// eventName is what client-go's util.GenerateEventName makes.
func eventName(object string, t time.Time) string {
	return fmt.Sprintf("%s.%x", object, t.UnixNano())
}

// kubeletReasons are the Events of a pod's start, in order, with their
// messages; a store holds them round-robin.
var kubeletReasons = []struct{ reason, message, typ string }{
	{"Scheduled", "Successfully assigned %s/%s to %s", corev1.EventTypeNormal},
	{"Pulling", `Pulling image "registry.k8s.io/e2e-test-images/agnhost:2.53"`, corev1.EventTypeNormal},
	{"Pulled", `Successfully pulled image "registry.k8s.io/e2e-test-images/agnhost:2.53" in 1.203s (1.203s including waiting). Image size: 51323894 bytes.`, corev1.EventTypeNormal},
	{"Created", "Created container: app", corev1.EventTypeNormal},
	{"Started", "Started container app", corev1.EventTypeNormal},
	{"Unhealthy", "Readiness probe failed: Get \"http://10.244.1.7:8080/healthz\": dial tcp 10.244.1.7:8080: connect: connection refused", corev1.EventTypeWarning},
	{"Killing", "Container app failed liveness probe, will be restarted", corev1.EventTypeNormal},
	{"BackOff", "Back-off restarting failed container app in pod %s_%s(%s)", corev1.EventTypeWarning},
	{"Pulled", `Container image "registry.k8s.io/e2e-test-images/agnhost:2.53" already present on machine`, corev1.EventTypeNormal},
	{"SandboxChanged", "Pod sandbox changed, it will be killed and re-created.", corev1.EventTypeNormal},
}

// kubeletEvent is a core/v1 Event as tools/record makes it for kubelet.
func kubeletEvent(ns, pod, node string, k int, now time.Time) *corev1.Event {
	r := kubeletReasons[k%len(kubeletReasons)]
	ref := podRef(ns, pod)
	message := r.message
	switch r.reason {
	case "Scheduled":
		message = fmt.Sprintf(message, ns, pod, node)
	case "BackOff":
		message = fmt.Sprintf(message, pod, ns, ref.UID)
	}
	ts := metav1.NewTime(now)
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(pod, now), Namespace: ns},
		InvolvedObject:      ref,
		Reason:              r.reason,
		Message:             message,
		Source:              corev1.EventSource{Component: "kubelet", Host: node},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		Type:                r.typ,
		ReportingController: "kubelet",
		ReportingInstance:   node,
	}
}

// schedulerEvent is an events.k8s.io/v1 Event as tools/events makes it for
// kube-scheduler.
func schedulerEvent(ns, pod, node string, now time.Time) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(pod, now), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: "default-scheduler",
		ReportingInstance:   "default-scheduler-control-plane",
		Action:              "Binding",
		Reason:              "Scheduled",
		Regarding:           podRef(ns, pod),
		Note:                fmt.Sprintf("Successfully assigned %s/%s to %s", ns, pod, node),
		Type:                corev1.EventTypeNormal,
	}
}

// Layout spreads a preloaded store's Events over namespaces and pods:
// Event i is about pod i/EventsPerPod, which lives in namespace
// (pod mod Namespaces). A store of n Events thus has n/EventsPerPod pods and
// n/Namespaces Events per namespace, and a `kubectl describe pod` finds
// EventsPerPod Events whatever n is.
type Layout struct {
	Namespaces   int
	EventsPerPod int
}

// DefaultLayout: 10 namespaces, 10 Events per pod.
var DefaultLayout = Layout{Namespaces: 10, EventsPerPod: 10}

// Pods is how many pods a store of n Events covers.
func (l Layout) Pods(n int) int { return (n + l.EventsPerPod - 1) / l.EventsPerPod }

// Namespace is the namespace of pod p.
func (l Layout) Namespace(p int) string { return fmt.Sprintf("bench-%d", p%l.Namespaces) }

// NamespaceNames are all the layout's namespaces.
func (l Layout) NamespaceNames() []string {
	names := make([]string, l.Namespaces)
	for i := range names {
		names[i] = l.Namespace(i)
	}
	return names
}

// Pod is the name of pod p (unique across namespaces).
func (l Layout) Pod(p int) string { return fmt.Sprintf("pod-%07d", p) }

// PodRef is the object reference of pod p, as its Events carry it.
func (l Layout) PodRef(p int) corev1.ObjectReference { return podRef(l.Namespace(p), l.Pod(p)) }

// preloadEpoch is the time preloaded Events claim; a fixed time keeps
// their names stable, so preloading up to n twice writes the same keys.
var preloadEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Event is the store's Event i.
func (l Layout) Event(i int) *corev1.Event {
	p := i / l.EventsPerPod
	at := preloadEpoch.Add(time.Duration(i) * time.Millisecond)
	return kubeletEvent(l.Namespace(p), l.Pod(p), nodeName(p%500), i%l.EventsPerPod, at)
}
