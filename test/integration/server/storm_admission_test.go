package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestStormLimiterAdmissionPlugin: the storm limiter is the admission plugin
// EventStormLimit. On by default, a reporter past its burst gets 429 and
// the admission metrics count the plugin under its name;
// --disable-admission-plugins=EventStormLimit turns it off, its early
// refusal with it, whatever the --event-rate-limit-* flags say.
func TestStormLimiterAdmissionPlugin(t *testing.T) {
	t.Parallel()
	// A burst of two, then one write every 100 s: the third write of one
	// reporter is over budget for the whole test.
	limits := []string{"--event-rate-limit-qps=0.01", "--event-rate-limit-burst=2"}
	for _, tc := range []struct {
		name          string
		args          []string
		wantThrottled int
	}{
		{name: "on by default", wantThrottled: 4},
		{name: "disabled", args: []string{"--disable-admission-plugins=" + storm.PluginName}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: append(limits, tc.args...)})
			// No client-go: it would sleep through Retry-After (100 s) and
			// retry.
			admin := framework.AdminRawClient(t, server)
			ns := framework.UniqueName("storm-admission")
			throttled := 0
			for i := range 6 {
				body, err := json.Marshal(framework.FullCoreEvent(ns, fmt.Sprintf("write-%d", i)))
				if err != nil {
					t.Fatal(err)
				}
				r := admin.Do(t, http.MethodPost, "/api/v1/namespaces/"+ns+"/events", body, map[string]string{"Content-Type": "application/json"})
				switch r.Code {
				case http.StatusCreated:
				case http.StatusTooManyRequests:
					throttled++
				default:
					t.Fatalf("write %d: %d %s", i, r.Code, r.Body)
				}
			}
			if throttled != tc.wantThrottled {
				t.Errorf("%d of 6 writes throttled, want %d", throttled, tc.wantThrottled)
			}
			calls := framework.MetricValue(t, server.Config(t), "apiserver_admission_controller_admission_duration_seconds_count",
				map[string]string{"name": storm.PluginName, "type": "admit"})
			if on := tc.wantThrottled > 0; on != (calls > 0) {
				t.Errorf("the admission metrics count %v calls of %s, want some: %v", calls, storm.PluginName, on)
			}
		})
	}
}
