package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/eventapiserver/event-apiserver/cmd/event-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand(os.Stdout)))
}
