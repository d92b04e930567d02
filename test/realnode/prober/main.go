// Command prober is the main process of the real-node test's client pods
// (package probe): it requests a Service's address and resolves a name
// through the pod's resolver, each every ~0.2 s, and the grid's name and
// Service when the environment names them, one line per attempt on
// stdout. It exits on SIGINT or SIGTERM and, as PID 1 of its container,
// reaps the orphans of what `kubectl exec` runs there. Static, no libc.
//
//	prober -svc ADDR -name NAME -name-ip IP
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/servicegroup/servicegroup/test/realnode/probe"
)

func main() {
	svc := flag.String("svc", "", "the address (host or host:port) to request over HTTP")
	name := flag.String("name", "", "the name to resolve")
	nameIP := flag.String("name-ip", "", "the only address the name may resolve to")
	flag.Parse()
	if *svc == "" || *name == "" || *nameIP == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: prober -svc ADDR -name NAME -name-ip IP")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go reap()
	probe.Run(ctx, probe.FromEnv(*svc, *name, *nameIP, os.Getenv), os.Stdout)
}

// reap waits for every child that ends: the prober starts none, so these
// are orphans handed to PID 1.
func reap() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGCHLD)
	for range sigs {
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
