// Package gridcli is the `kubectl grid` command tree (cmd/kubectl-grid is its
// main), in a package of its own so other programs, such as the demo, can run
// it in-process against their cluster.
package gridcli

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// options are shared by every subcommand: kubectl's connection flags and -o.
type options struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
}

// NewCommand returns the root command: explain and status, with kubectl's
// connection flags and -o json|yaml. Set its args and call Execute.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
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
	root.AddCommand(newExplainCommand(o), newStatusCommand(o), newRolloutCommand(o), newDoctorCommand(o))
	return root
}
