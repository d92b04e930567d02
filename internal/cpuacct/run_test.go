package cpuacct

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays every process of these tests, by the role in
// roleEnv: Run makes its caller a subreaper that waits for any child, so
// it runs in a process of its own (runner), never in the test process.
const roleEnv = "CPUACCT_TEST_ROLE"

// burnCPU is what the orphaned process spends.
const burnCPU = 400 * time.Millisecond

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(play(role))
	}
	os.Exit(m.Run())
}

func play(role string) int {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	as := func(role string) *exec.Cmd {
		cmd := exec.Command(self)
		cmd.Env = withRole(role)
		return cmd
	}
	switch role {
	case "runner": // measures the role in its arguments, prints its result
		u, code, err := Run([]string{self}, "", withRole(os.Args[1]))
		if err != nil {
			panic(err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(NewRecord("x", u, code))
		return 0
	case "orphaner": // leaves an orphan that burns CPU, outlives it, exits 7
		out, err := as("middle").Output()
		if err != nil {
			panic(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			panic(err)
		}
		// Gone once reaped: by the runner, its subreaper.
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(10 * time.Millisecond)
		}
		return 7
	case "middle": // starts the burner and exits without waiting for it
		cmd := as("burner")
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		fmt.Println(cmd.Process.Pid)
		return 0
	case "burner":
		for {
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			if duration(ru.Utime)+duration(ru.Stime) >= burnCPU {
				return 0
			}
		}
	case "killed":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	}
	panic("unknown role " + role)
}

// withRole is this process's environment playing role.
func withRole(role string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, roleEnv+"=") })
	return append(env, roleEnv+"="+role)
}

func runAs(t *testing.T, role string) Record {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, role)
	cmd.Env = withRole("runner")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("runner: %v", err)
	}
	var r Record
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("runner printed %q: %v", out, err)
	}
	return r
}

// TestRunCountsOrphans: a process whose parent exited without waiting for
// it (as a container shim's does) is reaped by Run's subreaper and its CPU
// time counted; the command's exit code is passed on.
func TestRunCountsOrphans(t *testing.T) {
	r := runAs(t, "orphaner")
	if r.Exit != 7 {
		t.Errorf("exit %d, want 7", r.Exit)
	}
	u := r.Usage()
	if cpu := u.CPU(); cpu < burnCPU {
		t.Errorf("CPU %s, want at least the orphan's %s", cpu, burnCPU)
	}
	// The command's own process only polled; the orphan burned.
	if u.SelfUnknown || u.Self >= burnCPU/2 {
		t.Errorf("own CPU %s (unknown: %v), want a small part of %s", u.Self, u.SelfUnknown, u.CPU())
	}
	if r.Wall <= 0 {
		t.Errorf("wall %v s", r.Wall)
	}
}

// TestRunSelf: the command's own CPU time is told apart from what it ran.
func TestRunSelf(t *testing.T) {
	u := runAs(t, "burner").Usage()
	// /proc counts in hundredths of a second.
	if u.SelfUnknown || u.Self < burnCPU-20*time.Millisecond || u.Self > u.CPU() {
		t.Errorf("own CPU %s (unknown: %v) of %s, want at least %s", u.Self, u.SelfUnknown, u.CPU(), burnCPU)
	}
}

// TestRunSignalExit: a command ended by signal N exits 128+N, as a shell
// reports it.
func TestRunSignalExit(t *testing.T) {
	if r := runAs(t, "killed"); r.Exit != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d, want %d", r.Exit, 128+int(syscall.SIGKILL))
	}
}

func TestRunNoCommand(t *testing.T) {
	if _, _, err := Run(nil, "", nil); err == nil {
		t.Error("Run with no command: no error")
	}
	if _, _, err := Run([]string{"/nonexistent/cpuacct-test"}, "", nil); err == nil {
		t.Error("Run of a missing program: no error")
	}
}
