package realnode

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
	"github.com/servicegroup/servicegroup/test/superedge"
)

// superEdgeRegistry is where SuperEdge's manifests pull its images from
// (edgeadm's default image repository); the nodes resolve it through the
// test's registry like the other upstream registries.
const superEdgeRegistry = "superedge.tencentcloudcr.com"

// superEdgeCRDDir is where SuperEdge's controller image carries the grid
// CRDs its CRD preparator applies (SuperEdge's Dockerfile copies them there).
const superEdgeCRDDir = "/etc/superedge/application-grid-controller/manifests"

// superEdgeBinaries are SuperEdge's components hack/superedge-bins.sh builds,
// each the entrypoint of its image under /usr/local/bin, as SuperEdge's
// Dockerfiles place them and its manifests' `command` names them.
var superEdgeBinaries = []string{"application-grid-controller", "application-grid-wrapper", "statefulset-grid-daemon"}

// SuperEdgeBuild is what hack/superedge-bins.sh built: the binaries and the
// CRD manifests of one SuperEdge release, and the newest kube-proxy its
// wrapper can serve.
type SuperEdgeBuild struct {
	Version   string
	BinDir    string
	Manifests string
	// KubeProxy is that kube-proxy's binary, KubeProxyVersion its release.
	KubeProxy, KubeProxyVersion string
}

// BuildSuperEdge runs hack/superedge-bins.sh, which builds SuperEdge's
// components from the Go module proxy once per (release, Go version) and
// afterwards only prints where they are; under CI it waits for the build
// .ci/run started in the background (its lock).
func BuildSuperEdge(ctx context.Context) (*SuperEdgeBuild, error) {
	repo, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "hack", "superedge-bins.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("hack/superedge-bins.sh: %w\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin := lines[len(lines)-1]
	b := &SuperEdgeBuild{BinDir: bin, Manifests: filepath.Join(filepath.Dir(bin), "manifests")}
	if b.Version, err = superedge.Pinned(repo, "SUPEREDGE"); err != nil {
		return nil, err
	}
	if b.KubeProxyVersion, err = superedge.Pinned(repo, "SUPEREDGE_KUBE_PROXY"); err != nil {
		return nil, err
	}
	dir, err := exec.CommandContext(ctx, filepath.Join(repo, "hack", "kube-proxy-bins.sh"), "--print-dir", b.KubeProxyVersion).Output()
	if err != nil {
		return nil, fmt.Errorf("hack/kube-proxy-bins.sh --print-dir %s: %w", b.KubeProxyVersion, err)
	}
	b.KubeProxy = filepath.Join(strings.TrimSpace(string(dir)), "kube-proxy")
	return b, nil
}

// Image is the upstream reference of SuperEdge's image of component, as
// SuperEdge's manifests name it.
func (b *SuperEdgeBuild) Image(component string) string {
	return superEdgeRegistry + "/superedge/" + component + ":" + b.Version
}

// PushSuperEdgeImages packages SuperEdge's binaries as images with the
// project's image builder's base layer (user and group files, nsswitch.conf
// "hosts: files dns" as SuperEdge's Dockerfiles write it) and pushes them
// to reg under SuperEdge's image names. They run as root, as SuperEdge's
// alpine images do (the hosts daemon writes a root-owned hostPath).
func PushSuperEdgeImages(ctx context.Context, reg *Registry, b *SuperEdgeBuild) error {
	logger := klog.FromContext(ctx)
	epoch := time.Unix(0, 0).UTC()
	base, err := imagebuild.BaseLayer(epoch)
	if err != nil {
		return err
	}
	crds, err := superEdgeCRDLayer(b.Manifests, epoch)
	if err != nil {
		return err
	}
	for _, component := range superEdgeBinaries {
		bin, err := cachedFileLayer(ctx, filepath.Join(b.BinDir, component), "usr/local/bin/"+component)
		if err != nil {
			return err
		}
		layers := []v1.Layer{base, bin}
		if component == "application-grid-controller" {
			layers = append(layers, crds)
		}
		idx, err := platformIndex(layers, []string{"/usr/local/bin/" + component})
		if err != nil {
			return err
		}
		upstream := b.Image(component)
		ref, err := name.ParseReference(MirrorPath(reg, upstream), name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		logger.V(2).Info("Pushed SuperEdge's image", "image", upstream, "as", ref)
	}
	return nil
}

// PushKubeProxyImage pushes the kube-proxy binary as
// registry.k8s.io/kube-proxy:TAG, built as PushTestImages builds the pinned
// release's (the Debian root file system with iptables, nftables and
// conntrack, the binary in /usr/local/bin), and returns the upstream name.
func PushKubeProxyImage(ctx context.Context, reg *Registry, binary, tag string) (string, error) {
	rootfs, err := debianRootfs(ctx)
	if err != nil {
		return "", err
	}
	rootfsLayer, err := gzipLayer(ctx, rootfs)
	if err != nil {
		return "", err
	}
	proxy, err := cachedFileLayer(ctx, binary, "usr/local/bin/kube-proxy")
	if err != nil {
		return "", err
	}
	idx, err := platformIndex([]v1.Layer{rootfsLayer, proxy}, []string{"/usr/local/bin/kube-proxy"})
	if err != nil {
		return "", err
	}
	upstream := "registry.k8s.io/kube-proxy:" + tag
	ref, err := name.ParseReference(MirrorPath(reg, upstream), name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return upstream, nil
}

// superEdgeCRDLayer holds the grid CRDs of SuperEdge's release where its
// controller's image has them.
func superEdgeCRDLayer(dir string, mtime time.Time) (v1.Layer, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []imagebuild.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files = append(files, imagebuild.File{Path: superEdgeCRDDir + "/" + e.Name(), Mode: fs.FileMode(0o644), Data: data})
	}
	if len(files) != 3 {
		return nil, fmt.Errorf("%s: %d CRD manifests, want SuperEdge's 3 grid CRDs", dir, len(files))
	}
	return imagebuild.NewLayer(files, mtime)
}
