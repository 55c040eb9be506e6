package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/eventapiserver/event-apiserver/cmd/event-apiserver/app"
	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
)

func main() {
	// After every package's init, k8s.io/apiserver's logger for gRPC among them.
	etcdclient.QuietAbandonedDials()
	os.Exit(cli.Run(app.NewCommand(os.Stdout)))
}
