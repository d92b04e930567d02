// Command application-grid-controller keeps DeploymentGrids, StatefulSetGrids
// and ServiceGrids reconciled: one child per nodeunit (one Service per
// ServiceGrid). See controller/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/version"
)

func main() {
	o := newOptions()
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	o.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if o.showVersion {
		fmt.Println(version.Version)
		return
	}
	// A bad flag is a usage error, reported before anything is read or started.
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "application-grid-controller:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The logger comes after Complete, which applies the logging flags.
	if err := o.Complete(); err != nil {
		klog.FromContext(ctx).Error(err, "Starting")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	if err := o.Run(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Stopped")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
