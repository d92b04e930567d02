package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
)

// KrewManifest is the krew plugin manifest's file name; the plugin is
// `kubectl grid`, krew name grid.
const KrewManifest = "grid.yaml"

// Archive is the name of the kubectl-grid archive of version for os/arch.
func Archive(version, osArch string) string {
	return "kubectl-grid_" + version + "_" + strings.ReplaceAll(osArch, "/", "_") + ".tar.gz"
}

// plugin builds kubectl-grid for each krew platform into a reproducible
// tar.gz (the binary and LICENSE), writes their SHA256SUMS and the krew
// manifest naming each archive's download URL and checksum.
func (o *Options) plugin(ctx context.Context) error {
	dir := filepath.Join(o.Out, PluginDir)
	license, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return err
	}
	var platforms []krewPlatform
	var sums []string
	for _, p := range o.KrewPlatforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || strings.Contains(goarch, "/") {
			return fmt.Errorf("kubectl-grid platform %q: want os/arch", p)
		}
		bin := "kubectl-grid"
		if goos == "windows" {
			bin += ".exe"
		}
		out := filepath.Join(dir, p, bin)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
			"-ldflags", "-s -w -buildid= "+imagebuild.VersionLDFlags(o.Version), "-o", out, "./cmd/kubectl-grid")
		cmd.Dir = o.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOARM=7", "GOFLAGS=-mod=readonly")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build kubectl-grid for %s: %w\n%s", p, err, b)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		if err := os.RemoveAll(filepath.Join(dir, goos)); err != nil {
			return err
		}
		tgz, err := o.tarGz([]archived{{bin, 0o755, data}, {"LICENSE", 0o644, license}})
		if err != nil {
			return err
		}
		name := Archive(o.Version, p)
		if err := os.WriteFile(filepath.Join(dir, name), tgz, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(tgz)
		sums = append(sums, hex.EncodeToString(sum[:])+"  "+name)
		platforms = append(platforms, krewPlatform{
			Selector: selector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
			URI:      strings.TrimSuffix(o.DownloadURL, "/") + "/" + name,
			SHA256:   hex.EncodeToString(sum[:]),
			Files:    []fileOp{{From: bin, To: "."}, {From: "LICENSE", To: "."}},
			Bin:      bin,
		})
	}
	if err := os.WriteFile(filepath.Join(dir, Checksums), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	m, err := yaml.Marshal(krewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   map[string]string{"name": "grid"},
		Spec: krewSpec{
			Version:          o.Version,
			Homepage:         "https://github.com/servicegroup/servicegroup",
			ShortDescription: "Explain what the edge service group does for a node",
			Description: "kubectl grid shows, for SuperEdge-style service groups (DeploymentGrid,\n" +
				"StatefulSetGrid, ServiceGrid) run by servicegroup: which endpoints of a\n" +
				"Service a node's kube-proxy gets and why, which pod a unified StatefulSetGrid\n" +
				"name means on a node, every nodeunit's child of a grid, and `doctor`: an\n" +
				"installation's problems, one line each with its fix.\n",
			Platforms: platforms,
		},
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, KrewManifest), m, 0o644)
}

type archived struct {
	name string
	mode int64
	data []byte
}

// tarGz is a reproducible archive of files: sorted, numeric owner 0, every
// time the source date.
func (o *Options) tarGz(files []archived) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: o.SourceDate, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// The krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2).
type (
	krewPlugin struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
		Spec       krewSpec          `json:"spec"`
	}
	krewSpec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Platforms        []krewPlatform `json:"platforms"`
	}
	krewPlatform struct {
		Selector selector `json:"selector"`
		URI      string   `json:"uri"`
		SHA256   string   `json:"sha256"`
		Files    []fileOp `json:"files"`
		Bin      string   `json:"bin"`
	}
	selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	fileOp struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
)

// writeChecksums writes OUT/SHA256SUMS: every release file but the OCI
// layouts (named by their digests already), sha256sum's format.
func writeChecksums(out string) error {
	var lines []string
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		if d.IsDir() {
			if rel == ImagesDir || rel == SignedDir || rel == filepath.Join(ChartDir, "signed") {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == Checksums {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := sha256.Sum256(b)
		lines = append(lines, hex.EncodeToString(s[:])+"  "+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(lines[:])
	return os.WriteFile(filepath.Join(out, Checksums), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
