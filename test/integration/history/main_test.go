// Package history tests the Event history beyond the TTL: every version
// kept, the eventrecords feed and its resume, capture across compaction,
// crashes and a restored etcd, a rolling upgrade to a newer schema,
// kubectl, the aggregated group, the OpenTelemetry Collector's export; and
// capture's benchmarks (skipped unless asked for).
package history

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
