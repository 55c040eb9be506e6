// Package timeline tests the kubectl-timeline plugin: against one server,
// through kube-apiserver's aggregator, installed with krew, and its --web
// page in headless Chromium (skipped without chromium), with its first
// paint as a benchmark (skipped unless asked for).
package timeline

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
