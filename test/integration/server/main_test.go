// Package server tests the binary as an operator runs it: authentication,
// its listeners, certificate renewal, exit codes, operator flags (the storm
// limiter's admission plugin among them), the image.
package server

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
