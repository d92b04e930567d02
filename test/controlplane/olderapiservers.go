package controlplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// APIServerRelease is one kube-apiserver release and its binary.
type APIServerRelease struct {
	Version, Binary string
}

// APIServerReleases returns the cached kube-apiserver of KubernetesVersion
// followed by each older release in hack/apiserver-versions.txt, built by
// hack/apiserver-bins.sh. When one is missing and either a build is wanted
// (CI) or one is under way (.ci/run starts it in the background), it runs
// the script, which waits for that build or does it, within ctx; otherwise
// the error names what is missing and how to build it.
func APIServerReleases(ctx context.Context) ([]APIServerRelease, error) {
	current, err := Binary(KubeAPIServer)
	if err != nil {
		return nil, err
	}
	out := []APIServerRelease{{Version: KubernetesVersion, Binary: current}}
	root, err := testbin.RepoRoot()
	if err != nil {
		return nil, err
	}
	versions, err := readVersions(filepath.Join(root, "hack", "apiserver-versions.txt"))
	if err != nil {
		return nil, err
	}
	bin := func(v string) string {
		return filepath.Join(CacheRoot(), "kube-apiserver-"+v+"-"+runtime.Version(), "bin", KubeAPIServer)
	}
	var missing []string
	for _, v := range versions {
		if _, err := os.Stat(bin(v)); err != nil {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 && (os.Getenv("CI") != "" || lockHeld(filepath.Join(CacheRoot(), "apiserver-bins.lock"))) {
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "apiserver-bins.sh"), missing...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("hack/apiserver-bins.sh %s: %w\n%s", strings.Join(missing, " "), err, out)
		}
	}
	for _, v := range versions {
		if _, err := os.Stat(bin(v)); err != nil {
			return nil, fmt.Errorf("kube-apiserver %s not found in %s: run 'make apiserver-bins' (hack/apiserver-bins.sh)", v, filepath.Dir(bin(v)))
		}
		out = append(out, APIServerRelease{Version: v, Binary: bin(v)})
	}
	return out, nil
}

// readVersions reads one release a line, # comments and blank lines skipped.
func readVersions(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

// lockHeld tells whether another process holds the flock on path.
func lockHeld(path string) bool {
	f, err := os.Open(path)
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
