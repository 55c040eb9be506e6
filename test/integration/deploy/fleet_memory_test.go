package deploy

import (
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestFleetHubFitsItsMemory holds every fleet hub install, from the chart
// or the overlays, to a memory limit that holds every member it may capture
// with its queue full: the queues fill when the store falls behind, all of
// them at once when it is down, and a limit short of that turns a
// PostgreSQL outage into the hub's OOM kill. The request stays within 90%
// of the limit, where GOMEMLIMIT (which follows it) makes the garbage
// collector work harder before the kernel steps in.
func TestFleetHubFitsItsMemory(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	fleet := []string{"mode=history-only", "history.store=postgres", "fleet.enabled=true"}
	cases := []helmCase{
		{name: "fleet-hub", set: fleet, overlays: []string{"overlays/fleet-hub"}},
		{name: "fleet-hub-10-members", set: append(fleet, "fleet.maxMembers=10")},
		{name: "fleet-hub-300-members-32MiB", set: append(fleet, "fleet.maxMembers=300", "fleet.memberQueueBytes=33554432")},
		{name: "fleet-hub-odd-queue", set: append(fleet, "fleet.memberQueueBytes=3000000")},
	}
	checkEachRender(t, cases, checkFleetHubMemory)
}

// checkFleetHubMemory is TestFleetHubFitsItsMemory for one render.
func checkFleetHubMemory(t *testing.T, source string, objs []*unstructured.Unstructured) {
	t.Helper()
	// history-only's own limit (capture's 64 MiB queue, the store's caches)
	// and what the hub keeps per member besides its queue (docs/fleet.md,
	// sizing: 2.2 MiB at 100 Events/s a member, 3.8-7.8 MiB at 180-240).
	const ownBytes, perMemberBytes = 512 << 20, 4 << 20
	// The server's defaults for the flags an install leaves out.
	members, queueBytes := int64(100), int64(8<<20)
	deploy := &appsv1.Deployment{}
	framework.FromUnstructured(t, framework.FindObject(t, objs, "Deployment", "event-apiserver"), deploy)
	container := deploy.Spec.Template.Spec.Containers[0]
	for _, arg := range container.Args {
		name, value, _ := strings.Cut(arg, "=")
		var err error
		switch name {
		case "--history-fleet-max-members":
			members, err = strconv.ParseInt(value, 10, 64)
		case "--history-fleet-member-queue-bytes":
			queueBytes, err = strconv.ParseInt(value, 10, 64)
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", source, arg, err)
		}
	}
	limit, request := container.Resources.Limits[corev1.ResourceMemory], container.Resources.Requests[corev1.ResourceMemory]
	if want := ownBytes + members*(queueBytes+perMemberBytes); limit.Value() < want {
		t.Errorf("%s: memory limit %s for %d members with %d-byte queues, want at least %d MiB",
			source, limit.String(), members, queueBytes, want>>20)
	}
	if request.Value() > limit.Value() || request.Value() < limit.Value()*85/100 {
		t.Errorf("%s: memory request %s, want 85-100%% of the limit %s", source, request.String(), limit.String())
	}
}
