package testnet

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// InNetNS runs fn on an OS thread that has entered the network namespace ns
// (an open /run/netns/NAME or /proc/PID/ns/net), then puts the thread back
// into its own namespace before handing it back to the Go scheduler. Sockets
// fn opens stay in ns for their whole life.
//
// Threads must not die here: a child started with Pdeathsig (as the test
// harnesses and the control plane start theirs) is killed when the *thread*
// that forked it exits, and any pooled thread may have forked one. Only if
// restoring fails does the goroutine exit still locked, so the runtime
// discards a thread that is in the wrong namespace.
func InNetNS(ns *os.File, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace %s: %w", ns.Name(), err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave network namespace %s: %w", ns.Name(), err))
			return // still locked: the runtime retires this thread
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
