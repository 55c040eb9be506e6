// Package fieldselectors tests field selectors: every label of both
// versions in lists, watches and kubectl, set-based forms, and the same
// answers as kube-apiserver v1.36.3.
package fieldselectors

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
