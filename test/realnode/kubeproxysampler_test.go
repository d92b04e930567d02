package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/testenv"
)

// TestKubeProxySampler runs processes named kube-proxy in a network
// namespace of their own: two long-lived ones are reported, one is not,
// nor is one that forks children (the instant between fork and exec).
func TestKubeProxySampler(t *testing.T) {
	testenv.Root(t, "a network namespace for the processes")
	testenv.Tools(t, "unshare")
	// Copies of sleep and of sh, both named kube-proxy (the name the
	// kernel shows is the executable's).
	bin := namedKubeProxy(t, "sleep")
	shell := namedKubeProxy(t, "sh")
	for _, tc := range []struct {
		name   string
		script string // run by sh in a new network namespace; $KP is the binary
		twice  bool
	}{
		{"one", `$KP 30`, false},
		{"two", `$KP 30 & $KP 30`, true},
		// A shell named kube-proxy with a subshell: a forked child that
		// keeps its parent's name, as a Go process's child does until it
		// execs iptables-restore.
		// One long-lived beside others living 50 ms each, one after the
		// other (a "kube-proxy --version"): not two proxies.
		{"short-lived", `$KP 30 & while :; do $KP 0.05; done`, false},
		{"forks", `$KPSH -c '(while :; do sleep 0.05; done); :'`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("unshare", "-n", "sh", "-c", tc.script+" & echo started; wait")
			cmd.Env = append(os.Environ(), "KP="+bin, "KPSH="+shell)
			// A group of its own: the cleanup ends the shell's children too.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
			buf := make([]byte, 8)
			if _, err := out.Read(buf); err != nil {
				t.Fatal(err)
			}
			ns := fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)
			s, err := startKubeProxySampler(map[string]string{ns: "node0"})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			samples, twice := s.Stop()
			t.Logf("%d samples: %s", samples, strings.Join(twice, "; "))
			if got := len(twice) > 0; got != tc.twice {
				t.Errorf("two kube-proxies reported: %v, want %v", got, tc.twice)
			}
		})
	}
}

func namedKubeProxy(t *testing.T, tool string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kube-proxy")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
