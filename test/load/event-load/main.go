// Command event-load puts Event workloads on an Events API server
// (kube-apiserver or event-apiserver) and its etcd, and runs the
// side-by-side benchmark of hack/bench.sh.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/eventapiserver/event-apiserver/test/load/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
