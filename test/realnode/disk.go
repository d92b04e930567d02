package realnode

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// hostLockPath serialises real-node runs on one machine: they share the
// host's fixed paths, sysctls and cgroup roots, so a second run (another
// checkout's `make test`) would read the first one's mount points as its own
// leftovers.
const hostLockPath = "/run/servicegroup-realnode.lock"

// hostLock waits for any other real-node run on this machine to end.
func hostLock(t *testing.T) (func(), error) {
	f, err := os.OpenFile(hostLockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Logf("waiting for the other real-node run on this machine (%s)", hostLockPath)
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", hostLockPath, err)
		}
	}
	return func() { f.Close() }, nil
}

// minFreeDisk is what a run needs on the filesystem of its directory: the
// nodes' containerd content and snapshots, the operator's image build and the
// kubelets' logs take about 3 GiB, and the kubelets' eviction floors sit below
// the rest.
const minFreeDisk = 5 << 30

// requireFreeDisk fails before anything starts when the disk is nearly full,
// with the reason, instead of letting the kubelets evict pods mid-run.
func requireFreeDisk(dir string, need uint64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	if free := st.Bavail * uint64(st.Bsize); free < need {
		return fmt.Errorf("%s has %.1f GiB free, a real-node run needs %.1f GiB: free some disk space (old test directories in %s, the Go build cache) and run again",
			dir, float64(free)/(1<<30), float64(need)/(1<<30), os.TempDir())
	}
	return nil
}

// keptTextSize is how much of one text file a failed run's directory keeps:
// a larger one keeps its first and last halves. A node's kubelet log passes
// it in a long run; its start says how the node came up and its end what the
// node did when the run failed.
const keptTextSize = 1 << 20

// pruneToLogs removes from a failed run's directory every file that is not a
// text file, and cuts each text file larger than keptTextSize to its ends:
// what is kept is what the failure is read from. A directory with anything
// still mounted under it is left whole: a bind mount would let the walk reach
// host files.
func pruneToLogs(dir string) bool {
	if mounted(dir) {
		return false
	}
	keep := map[string]bool{".log": true, ".yaml": true, ".yml": true, ".json": true, ".txt": true, ".conf": true, ".toml": true, ".md": true}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err == nil && info.Mode().IsRegular() && keep[strings.ToLower(filepath.Ext(path))] {
			if info.Size() <= keptTextSize || keepEnds(path, info.Size(), keptTextSize) == nil {
				return nil
			}
		}
		_ = os.Remove(path)
		return nil
	})
	// Empty directories left by the walk, deepest first.
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != dir {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
	return true
}

// keepEnds rewrites the file at path, size bytes long, to its first and last
// keep/2 bytes with a line between them saying how many were cut.
func keepEnds(path string, size, keep int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	half := keep / 2
	head := make([]byte, half)
	if _, err := io.ReadFull(f, head); err != nil {
		return err
	}
	tail := make([]byte, half)
	if _, err := f.ReadAt(tail, size-half); err != nil {
		return err
	}
	tmp := path + ".ends"
	cut := fmt.Sprintf("\n[... %d bytes cut by the real-node test: the first and last %d of %d kept ...]\n", size-2*half, half, size)
	if err := os.WriteFile(tmp, slices.Concat(head, []byte(cut), tail), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// mounted tells whether any mount point lies under dir.
func mounted(dir string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(data), "\n") {
		// Field 5 is the mount point, with spaces and the like octal-escaped.
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			return true
		}
	}
	return false
}
