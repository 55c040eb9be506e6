// Package compat is fidelity to kube-apiserver v1.36.3: the same requests,
// ordinary, malformed and hostile, sent to it and to event-apiserver, and
// the answers compared.
package compat

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
