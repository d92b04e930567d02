// Command kubectl-grid is a kubectl plugin (`kubectl grid ...`) that shows
// what the service group does for one node: which endpoints of a Service the
// wrapper serves there and why, how a unified StatefulSetGrid name resolves,
// and the state of every nodeunit of a grid. See README.md.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	if err := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).Execute(); err != nil {
		os.Exit(1)
	}
}

// options are shared by every subcommand: kubectl's connection flags and -o.
type options struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:          "kubectl-grid",
		Short:        "Explain what the service group serves to a node",
		SilenceUsage: true,
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl grid"},
		PersistentPreRunE: func(*cobra.Command, []string) error {
			switch o.output {
			case "", "table", "json", "yaml":
				return nil
			}
			return errUsage("--output must be table, json or yaml, not %q", o.output)
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: table (default), json or yaml.")
	root.AddCommand(newExplainCommand(o), newStatusCommand(o))
	return root
}
