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
// scratch copy of build/, as an operator with a checkout would.
type Operator struct {
	// Dir is the scratch directory: Dir/build is the copy, Dir/bin what
	// `make images` writes (its BIN).
	Dir string
	// Kubectl is the kubectl binary, Kubeconfig an admin kubeconfig.
	Kubectl, Kubeconfig string
	repo                string
}

// NewOperator copies build/ into dir.
func NewOperator(ctx context.Context, dir, kubectl, kubeconfig string) (*Operator, error) {
	repo, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", filepath.Join(repo, "build"), dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy build/: %w: %s", err, out)
	}
	return &Operator{Dir: dir, Kubectl: kubectl, Kubeconfig: kubeconfig, repo: repo}, nil
}

// SetUpstream edits manifests/upstream/upstream.env as build/README.md's
// "Upstream" says: the apiserver address edge nodes use.
func (o *Operator) SetUpstream(host string, port int) error {
	path := filepath.Join(o.Dir, "build/manifests/upstream/upstream.env")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	set := map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": fmt.Sprint(port)}
	found := 0
	for i, l := range lines {
		if k, _, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			if v, ok := set[k]; ok {
				lines[i] = k + "=" + v
				found++
			}
		}
	}
	if found != len(set) {
		return fmt.Errorf("%s: expected KUBERNETES_SERVICE_HOST and _PORT lines, found %d", path, found)
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}

// KubeProxyLeavesConntrackMax sets conntrack.maxPerCore: 0 in the
// kube-proxy-edge configuration (build/README.md: "change mode there"):
// nf_conntrack_max is host-wide and writable only from the host's own
// network namespace, where none of these nodes runs; kube-proxy refuses to
// start when it cannot raise it.
func (o *Operator) KubeProxyLeavesConntrackMax() error {
	path := filepath.Join(o.Dir, "build/manifests/kube-proxy/configmap.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	const anchor = "    kind: KubeProxyConfiguration\n"
	if !strings.Contains(string(data), anchor) {
		return fmt.Errorf("%s: no %q line", path, strings.TrimSpace(anchor))
	}
	out := strings.Replace(string(data), anchor, anchor+"    conntrack:\n      maxPerCore: 0\n", 1)
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return err
	}
	// The same for the static-pod install's kube-proxy (flags).
	path = filepath.Join(o.Dir, "build/static-pods/servicegroup-edge.yaml")
	if data, err = os.ReadFile(path); err != nil {
		return err
	}
	const flag = "    - --proxy-mode=iptables\n"
	if !strings.Contains(string(data), flag) {
		return fmt.Errorf("%s: no %q line", path, strings.TrimSpace(flag))
	}
	return os.WriteFile(path, []byte(strings.Replace(string(data), flag, flag+"    - --conntrack-max-per-core=0\n", 1)), 0o644)
}

// RenderStaticPods renders the static-pod install option as build/README.md
// says: an overlay of build/static-pods with the images `make images`
// pinned, rendered by kustomize into one manifest. It returns the path.
func (o *Operator) RenderStaticPods(ctx context.Context) (string, error) {
	script := `set -e
mkdir -p bin/static-pods
{ echo 'resources: [../../build/static-pods]'; sed -n '/^images:/,$p' bin/images/kustomization.yaml; } > bin/static-pods/kustomization.yaml
"$KUBECTL" kustomize bin/static-pods > bin/static-pods/servicegroup-edge.yaml`
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "KUBECTL="+o.Kubectl)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("render the static pods: %w: %s", err, out)
	}
	return filepath.Join(o.Dir, "bin/static-pods/servicegroup-edge.yaml"), nil
}

// MakeImages runs `make images PLATFORMS=<this machine> REGISTRY=<registry>`
// in the checkout, its output under the scratch directory.
func (o *Operator) MakeImages(ctx context.Context, registry string) (string, error) {
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "images",
		"PLATFORMS=linux/"+goarch(), "REGISTRY="+registry, "BIN="+filepath.Join(o.Dir, "bin"))
	cmd.Dir = o.repo
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
