package release

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
)

// Options are what one release is made of.
type Options struct {
	Root       string // repository root
	Version    string // vX.Y.Z, equal to build/VERSION
	Revision   string // source commit, in the images' labels
	SourceDate time.Time
	Out        string        // receives everything (Layout)
	Registry   string        // host/prefix the images and the chart go to; empty: a registry of its own on 127.0.0.1 for this run
	Insecure   bool          // plain HTTP to Registry
	Platforms  []v1.Platform // the images'
	// KrewPlatforms are the kubectl-grid archives' (os/arch, arm is v7).
	KrewPlatforms []string
	// DownloadURL is where the archives will be published; the krew
	// manifest's uri is DownloadURL/<archive>.
	DownloadURL string
	Key         string // cosign private key (cosign generate-key-pair); its password in COSIGN_PASSWORD
	Helm        string // the helm binary
	Cosign      string // the cosign binary
	Log         func(format string, args ...any)
}

// Layout of Out.
const (
	ImagesDir = "images" // OCI layouts, as make images writes them, and the overlay pinning the pushed digests
	SignedDir = "signed" // per image, cosign save: the image with its signature and SBOM attestation (cosign verify --local-image)
	SBOMDir   = "sbom"   // per image, NAME.cdx.json
	ChartDir  = "chart"  // servicegroup-X.Y.Z.tgz and, under chart/signed, the OCI artifact with its signature
	PluginDir = "plugin" // kubectl-grid archives, SHA256SUMS and grid.yaml (krew)
	PublicKey = "cosign.pub"
	Checksums = "SHA256SUMS"
)

// DefaultKrewPlatforms are where operators run kubectl.
var DefaultKrewPlatforms = []string{"linux/amd64", "linux/arm64", "linux/arm", "darwin/amd64", "darwin/arm64", "windows/amd64"}

var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// Result is what a release pushed.
type Result struct {
	Registry string              // where it went (the run's own registry when Options.Registry was empty)
	Images   map[string]v1.Hash  // name -> index digest
	Chart    string              // oci://REGISTRY/charts/servicegroup:X.Y.Z
	Digests  map[string][]string // name -> REGISTRY/name@digest, for cosign verify
}

// Make makes the release into o.Out.
func Make(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	for _, d := range []string{ImagesDir, SignedDir, SBOMDir, ChartDir, PluginDir} {
		if err := os.MkdirAll(filepath.Join(o.Out, d), 0o755); err != nil {
			return nil, err
		}
	}
	reg, insecure := strings.TrimSuffix(o.Registry, "/"), o.Insecure
	if reg == "" {
		addr, stop, err := localRegistry()
		if err != nil {
			return nil, err
		}
		defer stop()
		reg, insecure = addr+"/servicegroup", true
		logf("no REGISTRY: pushing to this run's own registry %s; %s/ keeps each signed image (cosign load pushes it on)", reg, SignedDir)
	}
	c := Cosign{Bin: o.Cosign, Key: o.Key, Insecure: insecure}
	if err := c.PublicKey(ctx, filepath.Join(o.Out, PublicKey)); err != nil {
		return nil, err
	}
	res := &Result{Registry: reg, Images: map[string]v1.Hash{}, Digests: map[string][]string{}}
	bo := imagebuild.Options{
		Version: o.Version, Revision: o.Revision, SourceDate: o.SourceDate, Platforms: o.Platforms,
		Go: imagebuild.GoBuild{Dir: o.Root, LDFlags: imagebuild.VersionLDFlags(o.Version)},
	}
	var pins []imagebuild.Pin
	for _, spec := range imagebuild.Images {
		start := time.Now()
		idx, err := imagebuild.Build(ctx, spec, bo)
		if err != nil {
			return nil, err
		}
		digest, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		if err := imagebuild.WriteLayout(filepath.Join(o.Out, ImagesDir, spec.Name), imagebuild.ManifestRepository+"/"+spec.Name+":"+o.Version, o.Version, idx); err != nil {
			return nil, err
		}
		ref := reg + "/" + spec.Name
		if err := imagebuild.Push(ctx, ref+":"+o.Version, idx, insecure); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		pinned := ref + "@" + digest.String()
		sbom, err := SBOM(spec, o.Version, o.SourceDate, idx)
		if err != nil {
			return nil, err
		}
		sbomPath := filepath.Join(o.Out, SBOMDir, spec.Name+".cdx.json")
		if err := os.WriteFile(sbomPath, sbom, 0o644); err != nil {
			return nil, err
		}
		if err := c.Sign(ctx, pinned); err != nil {
			return nil, err
		}
		if err := c.Attest(ctx, pinned, sbomPath); err != nil {
			return nil, err
		}
		if err := c.Verify(ctx, filepath.Join(o.Out, PublicKey), pinned); err != nil {
			return nil, fmt.Errorf("the signature just made does not verify: %w", err)
		}
		if err := c.Save(ctx, pinned, filepath.Join(o.Out, SignedDir, spec.Name)); err != nil {
			return nil, err
		}
		res.Images[spec.Name] = digest
		res.Digests[spec.Name] = []string{pinned}
		if o.Registry != "" {
			pins = append(pins, imagebuild.PushedPin(spec.Name, reg, digest))
		} else {
			// The run's own registry is gone afterwards: the overlay names
			// the layouts', as make images without REGISTRY does.
			pins = append(pins, imagebuild.LocalPin(spec.Name, imagebuild.ManifestRepository, o.Version))
		}
		logf("%s: pushed, signed, SBOM attested (%s)", pinned, time.Since(start).Round(time.Second))
	}
	if _, err := imagebuild.WriteOverlay(filepath.Join(o.Out, ImagesDir), filepath.Join(o.Root, "build/manifests/default"), pins); err != nil {
		return nil, err
	}
	chartRef, err := o.chart(ctx, c, reg, insecure)
	if err != nil {
		return nil, err
	}
	res.Chart = chartRef
	logf("chart: %s, signed", chartRef)
	if err := o.plugin(ctx); err != nil {
		return nil, err
	}
	logf("kubectl-grid: %d archives and %s", len(o.KrewPlatforms), filepath.Join(PluginDir, KrewManifest))
	if err := writeChecksums(o.Out); err != nil {
		return nil, err
	}
	return res, nil
}

func (o *Options) check() error {
	if !semver.MatchString(o.Version) {
		return fmt.Errorf("version %q: a release is vMAJOR.MINOR.PATCH (semantic versioning), e.g. v0.1.0", o.Version)
	}
	b, err := os.ReadFile(filepath.Join(o.Root, "build", "VERSION"))
	if err != nil {
		return err
	}
	if v := strings.TrimSpace(string(b)); v != o.Version {
		return fmt.Errorf("version %s is not build/VERSION's %s: set build/VERSION and the manifests' tags to the release first (build/README-images.md, Releases)", o.Version, v)
	}
	if o.Key == "" {
		return errors.New("no signing key: COSIGN_KEY names the cosign private key (cosign generate-key-pair; never in the repository), COSIGN_PASSWORD its password")
	}
	if _, err := os.Stat(o.Key); err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	if o.Helm == "" || o.Cosign == "" {
		return errors.New("helm and cosign are needed: make release-tools")
	}
	if len(o.Platforms) == 0 || len(o.KrewPlatforms) == 0 {
		return errors.New("no platforms")
	}
	if o.Out == "" {
		return errors.New("no output directory")
	}
	return nil
}

// localRegistry serves go-containerregistry's registry on 127.0.0.1 until
// stop; its address is host:port.
func localRegistry() (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(discardLogger())), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return l.Addr().String(), func() { _ = srv.Close() }, nil
}
