// Package watch tests watches: bookmarks and resumes after restarts,
// downtime and across replicas, etcd members killed, informers that must
// not relist, kubectl --watch, consistent lists from the cache, and the
// warning when etcd sends no progress notifications.
package watch

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
