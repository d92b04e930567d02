package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// Operator runs the operator guide's (build/README.md) commands in a
// scratch copy of the checkout, as an operator with a checkout would: the
// overlay `make images` writes names build/manifests/default relative to
// itself, so edits to the copy (upstream.env) are what gets applied.
type Operator struct {
	// Dir is the scratch checkout (Dir/build, Dir/bin).
	Dir string
	// Kubectl is the kubectl binary, Kubeconfig an admin kubeconfig.
	Kubectl, Kubeconfig string
	// Version is what `make images` stamps (git describe of the checkout).
	Version string
	// Substitutions replace placeholders of the guides' blocks (RunStepOn).
	Substitutions map[string]string
}

// NewOperator copies the checkout's files (tracked and untracked, not
// ignored: the working tree as it is) into dir.
func NewOperator(ctx context.Context, dir, kubectl, kubeconfig string) (*Operator, error) {
	repo, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	list := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	list.Dir = repo
	files, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		src := filepath.Join(repo, f)
		if st, err := os.Lstat(src); err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		if err := copyFile(src, filepath.Join(dir, f)); err != nil {
			return nil, err
		}
	}
	// The version `make images` would compute in the checkout (the copy has
	// no git metadata).
	describe := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty")
	describe.Dir = repo
	version, err := describe.Output()
	if err != nil {
		return nil, fmt.Errorf("git describe: %w", err)
	}
	return &Operator{Dir: dir, Kubectl: kubectl, Kubeconfig: kubeconfig, Version: strings.TrimSpace(string(version))}, nil
}

// CheckUpstream checks that manifests/upstream/upstream.env names the
// apiserver edge nodes use, as build/README.md's first step has the
// operator set it.
func (o *Operator) CheckUpstream(host string, port int) error {
	path := filepath.Join(o.Dir, "build/manifests/upstream/upstream.env")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	want := map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": fmt.Sprint(port)}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") && want[k] == v {
			delete(want, k)
		}
	}
	if len(want) > 0 {
		return fmt.Errorf("%s does not set %v:\n%s", path, want, data)
	}
	return nil
}

// KubeProxyLeavesConntrackMax sets --conntrack-max-per-core=0 for the
// static-pod install's kube-proxy (kube-proxy-edge and the stock one read
// the cluster's KubeProxyConfiguration, which says so already):
// nf_conntrack_max is host-wide and writable only from the host's own
// network namespace, where none of these nodes runs; kube-proxy refuses to
// start when it cannot raise it.
func (o *Operator) KubeProxyLeavesConntrackMax() error {
	path := filepath.Join(o.Dir, "build/static-pods/servicegroup-edge.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	const flag = "    - --proxy-mode=iptables\n"
	if !strings.Contains(string(data), flag) {
		return fmt.Errorf("%s: no %q line", path, strings.TrimSpace(flag))
	}
	return os.WriteFile(path, []byte(strings.Replace(string(data), flag, flag+"    - --conntrack-max-per-core=0\n", 1)), 0o644)
}

// MakeImagesVersion runs `make images PLATFORMS=<this machine>
// REGISTRY=<registry> VERSION=<version>` in the scratch checkout: the next
// release's build (other binaries, tags and digests), for the upgrade.
func (o *Operator) MakeImagesVersion(ctx context.Context, registry, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "images",
		"PLATFORMS=linux/"+goarch(), "REGISTRY="+registry, "VERSION="+version)
	cmd.Dir = o.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("make images: %w: %s", err, out)
	}
	return string(out), nil
}

// Run runs kubectl with the admin kubeconfig in the scratch directory.
func (o *Operator) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, o.Kubectl, append([]string{"--kubeconfig=" + o.Kubeconfig}, args...)...)
	cmd.Dir = o.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, st.Mode().Perm())
}
