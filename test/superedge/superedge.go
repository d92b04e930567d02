// Package superedge runs SuperEdge's own application-grid-controller (built
// from the Go module proxy by hack/superedge-bins.sh) against a real
// kube-apiserver and kube-controller-manager: what it writes, the takeover
// of its grids by this project's controller with nothing rolled, and its
// return (build/MIGRATION.md, "Going back to SuperEdge").
package superedge

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// crdDir is where SuperEdge's controller reads the grid CRDs it applies at
// start and every minute (an absolute path: its image carries them there).
const crdDir = "/etc/superedge/application-grid-controller/manifests"

// Build is what hack/superedge-bins.sh built.
type Build struct {
	BinDir    string
	Manifests string
	// KubeProxy is the newest kube-proxy SuperEdge's wrapper can serve
	// (SUPEREDGE_KUBE_PROXY), KubeProxyVersion its release.
	KubeProxy, KubeProxyVersion string
}

// RequireBuild runs hack/superedge-bins.sh when SuperEdge's binaries are
// not built yet and CI is set (it waits for the build .ci/run started, or
// builds them); without CI such a test is skipped, saying how to build them.
func RequireBuild(t testing.TB) *Build {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "superedge-bins.sh")
	out, err := exec.Command(script, "--print-dir").Output()
	if err != nil {
		t.Fatalf("hack/superedge-bins.sh --print-dir: %v", err)
	}
	b := &Build{BinDir: strings.TrimSpace(string(out))}
	b.Manifests = filepath.Join(filepath.Dir(b.BinDir), "manifests")
	if b.KubeProxyVersion, err = Pinned(root, "SUPEREDGE_KUBE_PROXY"); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(filepath.Join(root, "hack", "kube-proxy-bins.sh"), "--print-dir", b.KubeProxyVersion).Output()
	if err != nil {
		t.Fatalf("hack/kube-proxy-bins.sh --print-dir %s: %v", b.KubeProxyVersion, err)
	}
	b.KubeProxy = filepath.Join(strings.TrimSpace(string(out)), "kube-proxy")
	for _, p := range []string{filepath.Join(b.BinDir, "application-grid-controller"), b.KubeProxy} {
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if os.Getenv("CI") == "" {
			t.Skipf("%s is not built: run 'make superedge-bins'; CI=true makes this build it", p)
		}
		if out, err := exec.Command(script).CombinedOutput(); err != nil {
			t.Fatalf("hack/superedge-bins.sh: %v\n%s", err, out)
		}
		break
	}
	return b
}

// Pinned is a release root's hack/superedge-versions.env pins under key.
func Pinned(root, key string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "hack", "superedge-versions.env"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok && v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("hack/superedge-versions.env pins no %s", key)
}

// Controller is a running SuperEdge application-grid-controller.
type Controller struct {
	*controlplane.Process
}

// StartController runs SuperEdge's controller as its manifest does (no
// --leader-elect unless args say so), in a root directory of its own
// (chroot) where the CRD manifests are at the absolute path it reads them
// from and the kubeconfig is /kubeconfig. dir holds that root and the log.
func StartController(b *Build, cp *controlplane.ControlPlane, dir string, args ...string) (*Controller, error) {
	root := filepath.Join(dir, "superedge-root")
	if err := os.MkdirAll(filepath.Join(root, crdDir), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(root, "usr/local/bin"), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return nil, err
	}
	copies := map[string]string{
		filepath.Join(b.BinDir, "application-grid-controller"): "usr/local/bin/application-grid-controller",
		cp.Kubeconfig: "kubeconfig",
	}
	entries, err := os.ReadDir(b.Manifests)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		copies[filepath.Join(b.Manifests, e.Name())] = filepath.Join(crdDir, e.Name())
	}
	for src, dst := range copies {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(root, dst), data, 0o755); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command("chroot", append([]string{root, "/usr/local/bin/application-grid-controller", "--kubeconfig=/kubeconfig", "--v=4"}, args...)...)
	p, err := controlplane.StartProcess("superedge-application-grid-controller", cmd, dir)
	if err != nil {
		return nil, err
	}
	return &Controller{p}, nil
}

// running is nil while the process runs, else why it ended and its log.
func (c *Controller) running() error {
	if done, err := c.Exited(); done {
		return fmt.Errorf("SuperEdge's controller exited (%v):\n%s", err, c.LogTail(30))
	}
	return nil
}
