// Package metrics tests what /metrics says of the Events themselves
// (event_apiserver_events_total and its series cap): the Events client-go's
// recorders write through the server, and those a history-only replica
// captures from kube-apiserver.
package metrics

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
