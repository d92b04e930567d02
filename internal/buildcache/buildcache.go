// Package buildcache is the tests' side of what hack/ scripts build once
// per machine (Kubernetes releases, promtool, ...): where the cache is, and
// whether a script's build is under way, so that a test waits for a build
// .ci/run or `make test` started in the background instead of skipping.
package buildcache

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// Root is the cache's root, the rule of hack/lib/k8s-module.sh's
// cache_root: $SERVICEGROUP_CACHE, else $XDG_CACHE_HOME/servicegroup, else
// ~/.cache/servicegroup.
func Root() string {
	if root := os.Getenv("SERVICEGROUP_CACHE"); root != "" {
		return root
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "servicegroup")
}

// UnderWay tells whether a script holds its lock, the file lock in Root
// (flock): another process is building what it guards.
func UnderWay(lock string) bool {
	f, err := os.Open(filepath.Join(Root(), lock))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
