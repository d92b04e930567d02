package wrapper_test

import (
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on a locked OS thread switched into network namespace ns
// (a named one under /var/run/netns). Sockets fn creates stay in ns after
// the thread switches back; a thread that cannot switch back stays locked
// and dies with its goroutine.
func inNetns(ns string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/var/run/netns", ns))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}
