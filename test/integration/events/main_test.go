// Package events tests the Events API as one standalone server serves it:
// both versions and the conversion between them, kubectl, client-go's
// recorders, discovery, the etcd layout, TTLs and their rules, restarts;
// and the TTL backstop, there and on replicas over a three-member etcd
// whose leader keeps changing.
package events

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
