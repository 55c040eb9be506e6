// Command coredns is CoreDNS with only the plugins the cluster tier's
// Corefile (kubeadm's, test/cluster) uses, so that it builds in a fraction of
// the full plugin set's time. hack/build-coredns.sh builds it to
// _output/bin/coredns.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The plugins run in the order they appear here, which must be the order of
// CoreDNS's plugin.cfg (core/dnsserver/zdirectives.go); a directive missing
// from the list makes a Corefile that names it fail to load.
func init() {
	dnsserver.Directives = []string{
		"reload",
		"ready",
		"health",
		"prometheus",
		"errors",
		"loadbalance",
		"cache",
		"kubernetes",
		"loop",
		"forward",
	}
}

func main() {
	coremain.Run()
}
