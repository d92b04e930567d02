// Command kubectl-grid is a kubectl plugin (`kubectl grid ...`) that shows
// what the service group does for one node: which endpoints of a Service the
// wrapper serves there and why, how a unified StatefulSetGrid name resolves,
// and the state of every nodeunit of a grid. See README.md.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/servicegroup/servicegroup/internal/gridcli"
)

func main() {
	if err := gridcli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).Execute(); err != nil {
		os.Exit(1)
	}
}
