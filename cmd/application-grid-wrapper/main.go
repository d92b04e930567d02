// Command application-grid-wrapper serves kube-proxy the Services, Endpoints,
// EndpointSlices and Node of one edge node, filtered by topologyKeys, and
// proxies everything else to the (lite-)apiserver. See wrapper/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/servicegroup/servicegroup/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "application-grid-wrapper:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, or runs one of the one-shot modes; args are the
// command line with the program name. Serving: every flag is completed and
// validated (options.go, validation.go) before Run (serve.go) starts.
func run(ctx context.Context, args []string) error {
	o := newOptions()
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.printVersion {
		fmt.Println(version.Version)
		return nil
	}
	if o.getURL != "" {
		return getLoopback(ctx, o.getURL, os.Stdout)
	}
	if err := o.logs.Apply(); err != nil {
		return err
	}
	if o.chownState != "" {
		return prepareStateDir(o.stateDir, o.chownState)
	}
	if o.loopback != "" {
		return addLoopbackAddress(o.loopback)
	}
	if err := o.Complete(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	return o.Run(ctx)
}
