// Command pause is the sandbox (pause) image of the real-node test: the
// process that holds a pod's namespaces. It reaps orphans (it is PID 1 of
// the pod when the pod shares its PID namespace) and exits on SIGINT or
// SIGTERM. Static, no libc: the image is this one file.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
