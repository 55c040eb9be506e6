// kubectl-timeline is a kubectl plugin: `kubectl timeline pod/web-0` prints
// one object's Events over all the objects that bore its name, merging the
// live Events API with event-apiserver's history.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/eventapiserver/event-apiserver/cmd/kubectl-timeline/app"
)

func main() {
	os.Exit(app.Run(app.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}), os.Stderr))
}
