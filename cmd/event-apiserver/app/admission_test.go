package app

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// BenchmarkStandaloneAdmission prices what registering the limiter added to
// an Event create: the standalone admission chain (the reinvocation
// wrapper, the chain, k8s.io/apiserver's step and per-plugin metrics)
// around the plugin, against the plugin alone, as the server called it
// before. The limits are off, so every create goes the whole way.
func BenchmarkStandaloneAdmission(b *testing.B) {
	limits := storm.NewOptions()
	limits.CreateQPS, limits.UpdateQPS, limits.GlobalQPS = 0, 0, 0
	limits.UserQPS, limits.ReporterBytesQPS, limits.GlobalBytesQPS = 0, 0, 0

	var chain genericapiserver.Config
	if err := applyStandaloneAdmissionTo(&chain, newAdmissionOptions(), storm.NewInitializer(limits.Config())); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		admit admission.Interface
	}{
		{name: "plugin alone", admit: storm.New(limits.Config())},
		{name: "registered, in the chain", admit: chain.AdmissionControl},
	} {
		b.Run(bc.name, func(b *testing.B) {
			event := &core.Event{
				ObjectMeta:          metav1.ObjectMeta{Name: "e", Namespace: "default"},
				InvolvedObject:      core.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
				Reason:              "BackOff",
				Message:             "Back-off restarting failed container",
				Source:              core.EventSource{Component: "kubelet", Host: "node-1"},
				ReportingController: "kubelet",
				ReportingInstance:   "node-1",
				Type:                "Warning",
			}
			who := &user.DefaultInfo{Name: "system:node:node-1"}
			ctx := context.Background()
			for b.Loop() {
				a := admission.NewAttributesRecord(event, nil, schema.GroupVersionKind{Version: "v1", Kind: "Event"},
					"default", "e", schema.GroupVersionResource{Version: "v1", Resource: "events"}, "",
					admission.Create, &metav1.CreateOptions{}, false, who)
				if err := bc.admit.(admission.MutationInterface).Admit(ctx, a, nil); err != nil {
					b.Fatal(err)
				}
				if err := bc.admit.(admission.ValidationInterface).Validate(ctx, a, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
