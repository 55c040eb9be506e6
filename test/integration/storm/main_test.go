// Package storm holds the tests that must have the machine to themselves:
// write storms that must see only 201 and 429, the soak's memory figures,
// filling etcd's quota, hostile reporter names. Each calls
// framework.Exclusive and none is parallel; hack/test.sh runs this package
// alone before the others. A test that can share the machine belongs in
// another area.
package storm

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
