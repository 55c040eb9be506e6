// Package deploy tests what deploy/ ships: the kustomize overlays, the Helm
// chart and the static pods, rendered and checked (lease checkpoints on
// every etcd, one answer to a history query), applied to a real
// kube-apiserver v1.36.3 and run without a kubelet (framework.NewKubelet),
// the history-only install included.
package deploy

import (
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMain runs no test when _output/bin lacks the binaries these tests run
// (see framework.Main): the integration tier is hack/test.sh's, not a plain
// go test's on a fresh clone.
func TestMain(m *testing.M) { framework.Main(m) }
