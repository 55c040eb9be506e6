// Command etcd is etcd v3.6.x built from the go.etcd.io/etcd/server/v3 version
// the root go.mod pins, so tests that run etcd as a separate process (restarts,
// kills, multi-member clusters) use the same etcd as the embedded one.
// hack/build-etcd.sh builds it to _output/bin/etcd.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
