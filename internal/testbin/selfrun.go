package testbin

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/testwait"
)

// Self is the test binary running as the command under test: its TestMain
// runs main() when the environment variable it checks is "1". klog's
// output settings are process-wide, so a test of them needs a process of
// its own.
type Self struct {
	cmd    *exec.Cmd
	log    string
	exited chan error
}

// SelfMain is a command's TestMain: main when StartSelf started the test
// binary (env is "1"), the tests otherwise.
func SelfMain(m *testing.M, env string, main func()) {
	if os.Getenv(env) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// StartSelf runs the test binary with env=1 and args, its output in a
// file that the test's log shows if it fails. Cleanup kills it if it still
// runs.
func StartSelf(t testing.TB, env string, args ...string) *Self {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Self{cmd: cmd, log: out.Name(), exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-p.exited
		p.exited <- err
		if t.Failed() {
			log, _ := os.ReadFile(p.log)
			t.Logf("log of the command under test:\n%s", log)
		}
	})
	return p
}

// Stop sends SIGTERM and fails t unless the command then exits cleanly
// (within testwait.Floor).
func (p *Self) Stop(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(testwait.Floor):
		t.Fatalf("no exit within %s of SIGTERM", testwait.Floor)
	}
}

// Wait waits for the command to exit by itself and returns its exit code;
// it fails t if the command still runs after testwait.Floor.
func (p *Self) Wait(t testing.TB) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(testwait.Floor):
		t.Fatalf("the command still runs after %s", testwait.Floor)
		return -1
	}
}

// Log is what the command has written so far.
func (p *Self) Log(t testing.TB) string {
	t.Helper()
	log, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(log)
}
