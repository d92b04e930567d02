package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestCgroupMounts: the kubelet's cgroupRoot goes into the v1 hierarchies
// only; a run's cgroups are looked for in the cgroup2 one too (hybrid and
// pure cgroup2 machines), never in a cgroup mounted elsewhere.
func TestCgroupMounts(t *testing.T) {
	hybrid := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 / /run/elsewhere rw,relatime - cgroup cgroup rw,pids
`
	v1, all := cgroupMounts(hybrid)
	if want := []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/systemd"}; !slices.Equal(v1, want) {
		t.Errorf("hybrid v1 = %v, want %v", v1, want)
	}
	if want := []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"}; !slices.Equal(all, want) {
		t.Errorf("hybrid all = %v, want %v", all, want)
	}
	v1, all = cgroupMounts("30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\nnot a mount line\n")
	if len(v1) != 0 || !slices.Equal(all, []string{"/sys/fs/cgroup"}) {
		t.Errorf("cgroup2 only: v1 = %v, all = %v; want none and [/sys/fs/cgroup]", v1, all)
	}
}

// TestLeftoverRuns: a run's marks are swept once the process that made them
// is gone, even when its PID now names another process; a running run's
// and this process's own are kept.
func TestLeftoverRuns(t *testing.T) {
	state, cpu, unified := t.TempDir(), t.TempDir(), t.TempDir()
	mkdir := func(parts ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(parts...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	record := func(pid int, started string) {
		t.Helper()
		mkdir(state, strconv.Itoa(pid))
		if err := os.WriteFile(filepath.Join(state, strconv.Itoa(pid), startedFile), []byte(started), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cgroup := func(h string, pid int, node string) { mkdir(h, cgroupPrefix+strconv.Itoa(pid)+"-"+node, "kubepods") }

	// Running: this process, as it recorded itself.
	me := os.Getpid()
	started, err := processStart(me)
	if err != nil {
		t.Fatal(err)
	}
	record(me, started)
	cgroup(cpu, me, "node0")
	cgroup(unified, me, "node0")
	// Gone, its PID reused: PID 1 did not start when this record says.
	record(1, "not-its-start")
	cgroup(unified, 1, "node1")
	// Gone, its PID free: above the largest pid_max.
	const freePID = 4194305
	record(freePID, "1")
	// Gone after its teardown removed all but the cgroup2 cgroups (no state
	// directory), its PID now a running process of another kind.
	other := exec.Command("sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	cgroup(unified, other.Process.Pid, "node2")
	// The sweeping process's own marks, whatever they say.
	const self = freePID + 1
	record(self, "1")
	cgroup(unified, self, "node0")
	// Not a run's.
	mkdir(state, "notapid")
	mkdir(unified, "sgrnx-node0")
	mkdir(unified, "kubepods")

	got := leftoverRuns(state, []string{cpu, unified}, self)
	want := []int{1, other.Process.Pid, freePID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("leftoverRuns = %v, want %v", got, want)
	}
}

// TestRemoveCgroupTree removes nested directories deepest first, as an
// empty cgroup tree must be (rmdir, one level at a time).
func TestRemoveCgroupTree(t *testing.T) {
	root := filepath.Join(t.TempDir(), cgroupPrefix+"1-node0")
	for _, d := range []string{"kubepods/besteffort/pod1/c1", "kubepods/besteffort/pod1/c2", "kubepods/burstable"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeCgroupTree(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("%s still there (%v)", root, err)
	}
}
