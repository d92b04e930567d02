// Package cpuacct accounts for the CPU time of CI's runs: user+sys of a
// command and everything it starts, per test package and for a whole run.
// Wall time moves with the machine's load; CPU time hardly does, so a change
// in the suite's cost shows even on a shared machine.
package cpuacct

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Run runs argv in dir with env, its standard streams this process's, and
// returns its exit code and its Usage: the CPU time of the command and of
// every process it started that exited before it did, and of the command's
// own process alone (Self). This process becomes
// a child subreaper, so a descendant that outlives its own parent (a
// daemon, a container runtime's shim and the containers under it) is
// reaped, and counted, here rather than by init; descendants still running
// when the command exits are not counted.
//
// Run waits for any child of this process: call it from a process that
// starts no other children (a wrapper such as go test -exec runs).
func Run(argv []string, dir string, env []string) (Usage, int, error) {
	if len(argv) == 0 {
		return Usage{}, 0, fmt.Errorf("no command to run")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return Usage{}, 0, err
	}
	// Pdeathsig follows the thread that forked: keep it for the whole run.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return Usage{}, 0, fmt.Errorf("becoming a child subreaper: %w", err)
	}
	// go test signals its -exec program, not the test binary: pass on what
	// it sends (SIGQUIT on a timeout, for the test's goroutine dump). A
	// terminal's SIGINT and SIGHUP reach the whole process group, the
	// command too, so they are caught here (not ignored: an ignored signal
	// stays ignored across exec) and dropped.
	forward := make(chan os.Signal, 4)
	signal.Notify(forward, syscall.SIGQUIT, syscall.SIGTERM)
	defer signal.Stop(forward)
	drop := make(chan os.Signal, 4)
	signal.Notify(drop, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(drop)

	start := time.Now()
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{0, 1, 2},
		// When this process dies first (go test kills its -exec program
		// after a timeout), so does the command.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return Usage{}, 0, fmt.Errorf("starting %s: %w", path, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-forward:
				_ = syscall.Kill(pid, s.(syscall.Signal))
			case <-drop:
			case <-done:
				return
			}
		}
	}()

	code, self, err := reap(pid)
	if err != nil {
		return Usage{}, 0, err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return Usage{}, 0, err
	}
	u := Usage{
		User:        duration(ru.Utime),
		System:      duration(ru.Stime),
		Wall:        time.Since(start),
		SelfUnknown: self == nil,
	}
	if self != nil {
		u.Self = *self
	}
	return u, code, nil
}

// reap waits for children (the command and orphans handed to this
// subreaper) until pid exits, then collects the children that have exited
// by then. It returns pid's exit code (128+N when signal N ended it, as a
// shell says) and pid's own CPU time, read while it is a zombie (nil in
// the unlikely case that it was reaped with an orphan before it was read).
func reap(pid int) (int, *time.Duration, error) {
	var self *time.Duration
	code := -1
	for code < 0 {
		// Wait, without reaping, for any child to exit; if it is pid, its
		// own times are still in /proc until it is reaped.
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, nil, fmt.Errorf("waiting for %d: %w", pid, err)
		}
		wait := -1
		info = unix.Siginfo{}
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil); err == nil && info.Signo == int32(syscall.SIGCHLD) {
			if u, err := ProcessUsage(pid); err == nil {
				self = &u.Self
			}
			wait = pid
		}
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(wait, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, nil, fmt.Errorf("waiting for %d: %w", pid, err)
		case wpid != pid:
			continue
		case ws.Signaled():
			code = 128 + int(ws.Signal())
		default:
			code = ws.ExitStatus()
		}
	}
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || wpid <= 0 {
			return code, self, nil
		}
	}
}

func duration(tv syscall.Timeval) time.Duration {
	return time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
}
