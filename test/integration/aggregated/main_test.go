// Package aggregated tests event-apiserver behind kube-apiserver v1.36.3's
// aggregator, as docs/aggregated.md installs it: kubectl, RBAC, admission
// and a request sequence through the aggregation layer, and kube-apiserver's
// own health checks while the events etcd is down.
package aggregated

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
