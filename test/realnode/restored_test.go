package realnode

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// hostBefore is what teardown must restore: the kubelet's sysctls and which
// of the fixed host paths existed.
type hostBefore struct {
	sysctls map[string]string
	exists  map[string]bool
}

func snapshotHost(t *testing.T) hostBefore {
	t.Helper()
	b := hostBefore{sysctls: map[string]string{}, exists: map[string]bool{}}
	for _, k := range kubeletSysctls {
		v, err := readSysctl(k)
		if err != nil {
			t.Fatal(err)
		}
		b.sysctls[k] = v
	}
	for _, p := range append(hostPaths, "/run/xtables.lock") {
		_, err := os.Stat(p)
		b.exists[p] = err == nil
	}
	return b
}

// assertRestored checks that teardown left nothing: no process of the run,
// no cgroup, the sysctls as before, no mount of the run visible, no
// namespace of the fabric, no state.
func assertRestored(t *testing.T, before hostBefore, h *Host, f *harness.Fabric) {
	t.Helper()
	for k, v := range before.sysctls {
		if got, _ := readSysctl(k); got != v {
			t.Errorf("teardown left sysctl %s=%s, was %s", k, got, v)
		}
	}
	for p, existed := range before.exists {
		if _, err := os.Stat(p); !existed && err == nil {
			t.Errorf("teardown left %s, which did not exist before", p)
		}
	}
	runs := map[int]bool{h.PID: true}
	for _, p := range allProcesses() {
		if p != os.Getpid() && (processRun(p) == h.PID || inRunCgroup(p, runs)) {
			t.Errorf("teardown left process %d of this run", p)
		}
	}
	if left := runCgroups(runs); len(left) > 0 {
		t.Errorf("teardown left cgroups %v", left)
	}
	if _, err := os.Stat(filepath.Join(stateRoot, strconv.Itoa(h.PID))); err == nil {
		t.Errorf("teardown left %s", filepath.Join(stateRoot, strconv.Itoa(h.PID)))
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, cgroupPrefix+strconv.Itoa(h.PID)) || (f != nil && strings.Contains(line, f.Prefix)) {
				t.Errorf("teardown left a mount: %s", line)
			}
		}
	}
	if f != nil {
		entries, _ := os.ReadDir("/run/netns")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), f.Prefix) {
				t.Errorf("teardown left network namespace %s", e.Name())
			}
		}
	}
}
