package realnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// Images the nodes pull from upstream registries that an air-gapped site
// mirrors: each node's containerd sends these registries to the test's
// registry (hosts.toml), where the test pushes what it builds itself.
const (
	PauseImage  = "registry.k8s.io/pause:3.10"
	ClientImage = "registry.k8s.io/servicegroup-test/client:v1"
)

// proberPath is where the client image holds the prober (test/realnode/prober),
// its pods' main process.
const proberPath = "/usr/local/bin/prober"

// MirroredRegistries are the upstream registries each node resolves
// through the local registry (SuperEdge's examples name gcr.io and docker.io
// echo servers, the manifests registry.k8s.io's kube-proxy, SuperEdge's
// manifests its own registry, prometheus-operator quay.io).
var MirroredRegistries = []string{"registry.k8s.io", "gcr.io", "docker.io", superEdgeRegistry, "quay.io"}

// echoImages are SuperEdge's examples' images, served by our echoserver.
var echoImages = []string{
	"gcr.io/kubernetes-e2e-test-images/echoserver:2.2",
	"docker.io/superedge/echoserver:2.2",
}

// rootfsPackages are the Debian packages of the kube-proxy and client
// images (part of the root file system's cache key).
var rootfsPackages = []string{"iptables", "nftables", "conntrack", "dnsutils", "curl", "iproute2"}

// PushTestImages builds the pause, echo, kube-proxy and client images (the
// root file system, the prober on it) for the machine's platform and pushes
// them to reg under their mirrored paths. kubeProxy is the kube-proxy
// binary; work is a scratch directory.
func PushTestImages(ctx context.Context, reg *Registry, kubeProxy, kubeProxyTag, work string) error {
	logger := klog.FromContext(ctx)
	repo, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	bins := map[string]string{}
	for _, cmd := range []string{"pause", "echoserver", "prober"} {
		out := filepath.Join(work, cmd)
		build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./test/realnode/"+cmd)
		build.Dir = repo
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w: %s", cmd, err, b)
		}
		bins[cmd] = out
	}
	rootfs, err := debianRootfs(ctx)
	if err != nil {
		return err
	}
	rootfsLayer, err := gzipLayer(ctx, rootfs)
	if err != nil {
		return err
	}

	pause, err := fileLayer(bins["pause"], "pause")
	if err != nil {
		return err
	}
	echo, err := fileLayer(bins["echoserver"], "echoserver")
	if err != nil {
		return err
	}
	prober, err := cachedFileLayer(ctx, bins["prober"], strings.TrimPrefix(proberPath, "/"))
	if err != nil {
		return err
	}
	proxy, err := cachedFileLayer(ctx, kubeProxy, "usr/local/bin/kube-proxy")
	if err != nil {
		return err
	}
	pushes := []struct {
		refs       []string
		layers     []v1.Layer
		entrypoint []string
	}{
		{[]string{PauseImage}, []v1.Layer{pause}, []string{"/pause"}},
		{echoImages, []v1.Layer{echo}, []string{"/echoserver"}},
		{[]string{"registry.k8s.io/kube-proxy:" + kubeProxyTag}, []v1.Layer{rootfsLayer, proxy}, []string{"/usr/local/bin/kube-proxy"}},
		{[]string{ClientImage}, []v1.Layer{rootfsLayer, prober}, []string{"sleep", "infinity"}},
	}
	for _, p := range pushes {
		idx, err := platformIndex(p.layers, p.entrypoint)
		if err != nil {
			return err
		}
		for _, upstream := range p.refs {
			ref, err := name.ParseReference(MirrorPath(reg, upstream), name.Insecure)
			if err != nil {
				return err
			}
			if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
				return fmt.Errorf("push %s: %w", ref, err)
			}
			logger.V(2).Info("Pushed test image", "image", upstream, "as", ref)
		}
	}
	return nil
}

// MirrorPath is where the local registry holds an upstream image: its
// repository path without the upstream host (what containerd asks a
// mirror for).
func MirrorPath(reg *Registry, upstream string) string {
	_, path, _ := strings.Cut(upstream, "/")
	return reg.Addr + "/" + path
}

// platformIndex is a one-platform OCI index (containerd skips images whose
// platform it cannot tell).
func platformIndex(layers []v1.Layer, entrypoint []string) (v1.ImageIndex, error) {
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, mutate.IndexAddendum{
		Add: img,
		Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: "linux", Architecture: runtime.GOARCH},
		},
	}), nil
}

// fileLayer is a layer holding one executable at path (relative, parent
// directories included).
func fileLayer(src, path string) (v1.Layer, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := strings.Split(path, "/")
	for i := 1; i < len(dirs); i++ {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(dirs[:i], "/") + "/", Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: 0o755, Size: int64(len(data))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
}

// cachedFileLayer is fileLayer for a big file, its tarball compressed once
// and kept in the cache, keyed on the file's content.
func cachedFileLayer(ctx context.Context, src, path string) (v1.Layer, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(controlplane.CacheRoot(), "realnode-layers")
	tarPath := filepath.Join(dir, hex.EncodeToString(h.Sum(nil)[:8])+"-"+filepath.Base(path)+".tar")
	if _, err := os.Stat(tarPath + ".gz"); err != nil {
		layer, err := fileLayer(src, path)
		if err != nil {
			return nil, err
		}
		rc, err := layer.Uncompressed()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		tmp := tarPath + fmt.Sprintf(".%d.tmp", os.Getpid())
		out, err := os.Create(tmp)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(out, rc)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, tarPath)
		}
		if err != nil {
			os.Remove(tmp)
			return nil, err
		}
	}
	return gzipLayer(ctx, tarPath)
}

// gzipLayer is the layer of a tarball, compressed once next to it with
// gzip(1) (compressing in this process would cost far more under -race),
// its digests cached beside it (cachedGzipLayer).
func gzipLayer(ctx context.Context, tarPath string) (v1.Layer, error) {
	gz := tarPath + ".gz"
	if _, err := os.Stat(gz); err != nil {
		tmp := gz + fmt.Sprintf(".%d.tmp", os.Getpid())
		cmd := exec.CommandContext(ctx, "sh", "-c", `gzip -1 -n -c "$1" > "$2"`, "sh", tarPath, tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("gzip %s: %w: %s", tarPath, err, out)
		}
		if err := os.Rename(tmp, gz); err != nil {
			return nil, err
		}
		if tarPath != "" && strings.HasPrefix(tarPath, filepath.Join(controlplane.CacheRoot(), "realnode-layers")) {
			os.Remove(tarPath) // only the compressed form is needed again
		}
	}
	return cachedGzipLayer(gz)
}

// debianRootfs is a minimal Debian root file system (this machine's
// release, from its apt sources) with rootfsPackages, made by mmdebstrap
// once and cached under the servicegroup cache keyed on what makes it:
// mmdebstrap's arguments (release, variant, packages) and the architecture.
func debianRootfs(ctx context.Context) (string, error) {
	release, err := debianRelease()
	if err != nil {
		return "", err
	}
	args := []string{"--quiet", "--variant=minbase", "--include=" + strings.Join(rootfsPackages, ","), release}
	sum := sha256.Sum256([]byte(strings.Join(args, "\n") + "\n" + runtime.GOARCH))
	dir := filepath.Join(controlplane.CacheRoot(), "realnode-rootfs")
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+".tar")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// mmdebstrap picks its output format by the extension.
	tmp := strings.TrimSuffix(path, ".tar") + fmt.Sprintf(".%d.tmp.tar", os.Getpid())
	defer os.Remove(tmp)
	klog.FromContext(ctx).Info("Building the Debian root file system of the test images (cached afterwards)", "release", release, "packages", rootfsPackages)
	cmd := exec.CommandContext(ctx, "mmdebstrap", append(args, tmp)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mmdebstrap: %w: %s", err, out)
	}
	return path, os.Rename(tmp, path)
}

func debianRelease() (string, error) {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION_CODENAME="); ok && v != "" {
			return strings.Trim(v, `"`), nil
		}
	}
	return "", fmt.Errorf("/etc/os-release names no VERSION_CODENAME")
}

func goarch() string { return runtime.GOARCH }
