package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// What a run leaves on the host while it lives, each marked with the
// creating process's PID so a later run can recognise what a crashed run
// left behind (and only that):
//   - every process it starts (holder, containerd, kubelet, and through
//     containerd every shim) carries runEnv=<pid> in its environment;
//   - each node's cgroups live under cgroupPrefix<pid>-<node> in every
//     cgroup hierarchy (the kubelet's cgroupRoot: every container; runc
//     makes them in a hybrid machine's cgroup2 hierarchy too);
//   - stateRoot/<pid>/ records the run's process (PID and start time), the
//     host sysctls as they were before the first kubelet started and the
//     paths the run created on the host.
//
// Mounts need no record: each node's kubelet, containerd and shims run in
// a mount namespace of the node's own, so their mounts vanish with its
// last process.
const (
	runEnv       = "SERVICEGROUP_REALNODE"
	cgroupPrefix = "sgrn"
	stateRoot    = "/run/servicegroup-realnode"
	cgroupFS     = "/sys/fs/cgroup"
)

// kubeletSysctls are the host-wide sysctls a kubelet sets at start
// (even inside a network namespace).
var kubeletSysctls = []string{"vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops"}

// hostPaths are the fixed host paths of a node (kubeadm's layout for the
// kubelet, the hostPath volumes of the shipped manifests, the kubelet's log
// symlinks): each node gets its own directory bound there inside its mount
// namespace, as each real node has its own disk; the host gets an empty mount point when
// the path was missing, removed again at teardown.
var hostPaths = []string{
	"/etc/kubernetes",
	"/var/lib/kubelet",
	"/var/log/pods",
	"/var/log/containers",
	"/var/lib/application-grid-wrapper",
	"/var/lib/coredns-gridhosts",
	"/etc/servicegroup",
	// SuperEdge's hosts file, for the migration (testdata/superedge.yaml).
	"/var/lib/statefulset-grid-daemon",
}

// Host is this run's footprint on the host.
type Host struct {
	PID      int
	stateDir string
}

var cgroupName = regexp.MustCompile(`^` + cgroupPrefix + `(\d+)-`)

// NewHost sweeps what crashed runs left, then records the host's state
// (sysctls, missing paths) for this run and creates the mount points.
func NewHost(ctx context.Context) (*Host, error) {
	SweepLeftovers(ctx)
	h := &Host{PID: os.Getpid()}
	h.stateDir = filepath.Join(stateRoot, strconv.Itoa(h.PID))
	if err := os.MkdirAll(h.stateDir, 0o700); err != nil {
		return nil, err
	}
	started, err := processStart(h.PID)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(h.stateDir, startedFile), []byte(started), 0o600); err != nil {
		return nil, err
	}
	var sysctls bytes.Buffer
	for _, k := range kubeletSysctls {
		v, err := readSysctl(k)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sysctls, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(filepath.Join(h.stateDir, "sysctls"), sysctls.Bytes(), 0o600); err != nil {
		return nil, err
	}
	var created []string
	for _, p := range hostPaths {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			created = append(created, p)
		}
	}
	if _, err := os.Stat("/run/xtables.lock"); errors.Is(err, os.ErrNotExist) {
		created = append(created, "/run/xtables.lock") // kube-proxy's hostPath FileOrCreate
	}
	if err := os.WriteFile(filepath.Join(h.stateDir, "created"), []byte(strings.Join(created, "\n")), 0o600); err != nil {
		return nil, err
	}
	for _, p := range hostPaths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Restore ends every process and cgroup of this run and puts the host back
// as NewHost found it. Safe to call more than once.
func (h *Host) Restore(ctx context.Context) error {
	if h == nil {
		return nil
	}
	return sweep(ctx, func(pid int) bool { return pid == h.PID })
}

// SweepLeftovers restores what runs whose process is gone left behind.
func SweepLeftovers(ctx context.Context) {
	gone := map[int]bool{}
	for _, pid := range leftoverRuns(stateRoot, cgroupTrees(), os.Getpid()) {
		gone[pid] = true
	}
	if err := sweep(ctx, func(pid int) bool { return gone[pid] }); err != nil {
		klog.FromContext(ctx).Error(err, "Sweeping a crashed run's leftovers")
	}
}

// startedFile, in a run's state directory, holds its process's start time.
const startedFile = "started"

// leftoverRuns lists the runs that left marks (a state directory under
// stateDir, cgroups in hierarchies) and whose process is gone, self aside.
func leftoverRuns(stateDir string, hierarchies []string, self int) []int {
	var out []int
	for _, pid := range runPIDsIn(stateDir, hierarchies) {
		if pid != self && !runAlive(stateDir, pid) {
			out = append(out, pid)
		}
	}
	return out
}

// runAlive reports whether run pid's process still runs: the process of
// that PID started when the run's state directory says. PIDs are reused
// (pid_max is 32768 here), so a PID alone does not name a run. A run writes
// the directory before it makes anything else and removes it last, so
// marks without one (or without its start time) belong to no running run.
func runAlive(stateDir string, pid int) bool {
	data, err := os.ReadFile(filepath.Join(stateDir, strconv.Itoa(pid), startedFile))
	if err != nil {
		return false
	}
	started, err := processStart(pid)
	return err == nil && started == strings.TrimSpace(string(data))
}

// processStart is a process's start time in clock ticks after boot
// (field 22 of /proc/<pid>/stat).
func processStart(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// from after its closing one, where field 3 starts.
	var fields []string
	if i := bytes.LastIndexByte(data, ')'); i >= 0 {
		fields = strings.Fields(string(data[i+1:]))
	}
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return fields[19], nil
}

// sweep kills the processes and removes the cgroups of every run whose PID
// matches, restores the sysctls it recorded and removes the paths it created.
func sweep(ctx context.Context, match func(pid int) bool) error {
	logger := klog.FromContext(ctx)
	var errs []error
	runs := map[int]bool{}
	for _, pid := range runPIDsIn(stateRoot, cgroupTrees()) {
		if match(pid) {
			runs[pid] = true
		}
	}
	if len(runs) == 0 {
		return nil
	}
	owned := func(p int) bool { return runs[processRun(p)] }
	deadline := time.Now().Add(time.Minute)
	for {
		var left []int
		for _, p := range allProcesses() {
			if p != os.Getpid() && (owned(p) || inRunCgroup(p, runs)) {
				left = append(left, p)
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("processes of run(s) %v still alive after SIGKILL: %v", keysOf(runs), left))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, dir := range runCgroups(runs) {
		if err := removeCgroupTree(dir); err != nil {
			errs = append(errs, err)
		}
	}
	for pid := range runs {
		dir := filepath.Join(stateRoot, strconv.Itoa(pid))
		if data, err := os.ReadFile(filepath.Join(dir, "sysctls")); err == nil {
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					if err := writeSysctl(k, v); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
		if data, err := os.ReadFile(filepath.Join(dir, "created")); err == nil {
			for _, p := range strings.Split(string(data), "\n") {
				if p == "" || stillUsed(p, pid) {
					continue
				}
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		if pid != os.Getpid() {
			logger.Info("Restored the host after a crashed real-node run", "pid", pid)
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stillUsed reports whether another live run may need the path (a mount
// point in its nodes' mount namespaces: removing it would detach theirs).
func stillUsed(_ string, creator int) bool {
	for _, pid := range runPIDsIn(stateRoot, cgroupTrees()) {
		if pid != creator && runAlive(stateRoot, pid) {
			return true
		}
	}
	return false
}

// runPIDsIn lists the runs that left a state directory in stateDir or
// cgroups in hierarchies.
func runPIDsIn(stateDir string, hierarchies []string) []int {
	seen := map[int]bool{}
	if entries, err := os.ReadDir(stateDir); err == nil {
		for _, e := range entries {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				seen[pid] = true
			}
		}
	}
	for _, dir := range hierarchies {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if m := cgroupName.FindStringSubmatch(e.Name()); m != nil {
				pid, _ := strconv.Atoi(m[1])
				seen[pid] = true
			}
		}
	}
	return keysOf(seen)
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (the kubelet
// needs its cgroupRoot in each).
func cgroupHierarchies() []string {
	v1, _ := cgroupMounts(readMountinfo())
	return v1
}

// cgroupTrees are all mounted cgroup hierarchies, v1 and cgroup2: where a
// run's cgroups are looked for and removed. On a hybrid machine runc makes
// every container's cgroup in the cgroup2 one as well, which the kubelet
// never removes.
func cgroupTrees() []string {
	_, all := cgroupMounts(readMountinfo())
	return all
}

func readMountinfo() string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	return string(data)
}

// cgroupMounts reads a mountinfo: the cgroup v1 hierarchies mounted in
// cgroupFS, and those with the cgroup2 hierarchy mounted on cgroupFS or in
// it, each sorted.
func cgroupMounts(mountinfo string) (v1, all []string) {
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if !ok || len(f) < 5 {
			continue
		}
		switch dir := f[4]; {
		case strings.HasPrefix(post, "cgroup ") && filepath.Dir(dir) == cgroupFS:
			v1 = append(v1, dir)
			all = append(all, dir)
		case strings.HasPrefix(post, "cgroup2 ") && (dir == cgroupFS || filepath.Dir(dir) == cgroupFS):
			all = append(all, dir)
		}
	}
	sort.Strings(v1)
	sort.Strings(all)
	return v1, all
}

func runCgroups(runs map[int]bool) []string {
	var out []string
	for _, h := range cgroupTrees() {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			if m := cgroupName.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
				if pid, _ := strconv.Atoi(m[1]); runs[pid] {
					out = append(out, filepath.Join(h, e.Name()))
				}
			}
		}
	}
	return out
}

// removeCgroupTree removes a cgroup and its children, deepest first (its
// processes must be gone).
func removeCgroupTree(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func allProcesses() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// processRun is the run a process belongs to by its environment, or 0.
func processRun(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return 0
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(runEnv+"=")); ok {
			n, _ := strconv.Atoi(string(v))
			return n
		}
	}
	return 0
}

// inRunCgroup reports whether a process sits in one of the runs' cgroups
// (a container).
func inRunCgroup(pid int, runs map[int]bool) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(parts[2], "/"), "/")
		if m := cgroupName.FindStringSubmatch(first + "-"); m != nil {
			if n, _ := strconv.Atoi(m[1]); runs[n] {
				return true
			}
		}
	}
	return false
}

func readSysctl(key string) (string, error) {
	data, err := os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/")))
	return strings.TrimSpace(string(data)), err
}

func writeSysctl(key, value string) error {
	return os.WriteFile(filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/")), []byte(value), 0o644)
}

func keysOf[V any](m map[int]V) []int { return slices.Sorted(maps.Keys(m)) }
