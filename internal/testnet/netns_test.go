package testnet

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/servicegroup/servicegroup/internal/testenv"
)

// inode identifies a namespace.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// newNetNS makes a network namespace and returns it open; the thread that
// made it goes back to its own before it is unlocked.
func newNetNS(t *testing.T) *os.File {
	t.Helper()
	type made struct {
		f   *os.File
		err error
	}
	done := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- made{err: err}
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- made{err: err}
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- made{f, err}
	}()
	m := <-done
	if m.err != nil {
		testenv.Missing(t, "cannot make a network namespace here: %v", m.err)
	}
	t.Cleanup(func() { m.f.Close() })
	return m.f
}

// TestInNetNS: fn runs in the namespace given; the thread that ran it is
// back in its own afterwards.
func TestInNetNS(t *testing.T) {
	ns := newNetNS(t)
	own := inode(t, "/proc/self/ns/net")
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	target := st.Ino
	if own == target {
		t.Fatal("the new namespace is this process's")
	}
	for range 20 { // enough calls to reuse threads
		var inside uint64
		if err := InNetNS(ns, func() error {
			inside = inode(t, "/proc/thread-self/ns/net")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if inside != target {
			t.Fatalf("fn ran in namespace %d, want %d", inside, target)
		}
	}
	for range 20 {
		done := make(chan uint64, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var st unix.Stat_t
			_ = unix.Stat("/proc/thread-self/ns/net", &st)
			done <- st.Ino
		}()
		if got := <-done; got != own {
			t.Fatalf("a thread left in namespace %d after InNetNS, want %d", got, own)
		}
	}
}
