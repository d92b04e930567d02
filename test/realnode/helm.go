package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
	"github.com/servicegroup/servicegroup/internal/release"
	"github.com/servicegroup/servicegroup/internal/releasetools"
)

// The Helm path of build/README.md ("Install with Helm"): its blocks,
// marked `<!-- helm-step: NAME -->`, verify the release's signatures with
// cosign and install, upgrade and uninstall with helm, the real binaries of
// hack/release-tools.sh. A marker of its own: TestRealNodes runs the Helm
// path in its lifecycle and the kustomize blocks (`step:`) of the same
// names on its own, and fails on either kind of marker it never runs.
const (
	helmStepMarker    = "<!-- helm-step: "
	HelmInstallStep   = "helm-install-cluster"
	HelmUpgradeStep   = "helm-upgrade"
	HelmUninstallStep = "helm-uninstall-cluster"
	// HelmZoneStep sets the controller's --zone-from-grid-key on the
	// release installed (KEY; empty: off), for native-mode grids.
	HelmZoneStep = "helm-zone-from-grid-key"
	// HelmMonitoringStep turns on the chart's monitoring (ServiceMonitors,
	// PrometheusRule, secure metrics) on the release installed.
	HelmMonitoringStep = "helm-monitoring"
)

// HelmRelease publishes a build as `make release` does (its images
// signed, the chart pushed and signed) into the test's registry, with a
// throwaway key pair, and runs the guide's Helm blocks against it. In
// TestRealNodes, after before-you-start: NewHelmRelease (UpstreamHost and
// UpstreamPort set), Publish(op.Version); RunStep(HelmInstallStep) where
// install-cluster runs; after check-images VerifyRunning of
// workloadImages; for the upgrade, after MakeImagesVersion(next),
// Publish(next) and RunStep(HelmUpgradeStep, next) with the same wait for
// the old node CoreDNS pods, then VerifyRunning again; RunStep(
// HelmUninstallStep) where uninstall-cluster runs; each RunStep in a
// traffic window as the guide's steps are.
type HelmRelease struct {
	Helm, Cosign string
	// Registry is host:port/prefix, where `make images` pushed.
	Registry string
	// Key is the private key, outside the checkout; the public key is
	// cosign.pub in the checkout, where the guide's blocks read it (an
	// operator downloads it from the release).
	Key string
	// UpstreamHost and UpstreamPort replace the guide's upstream address
	// (upstream.host=192.0.2.1, upstream.port=6443) in its blocks.
	UpstreamHost string
	UpstreamPort int
	// BinDir holds helm and cosign as the blocks run them: stand-ins that
	// add the flags of a plain-HTTP registry (the test's registry is plain
	// HTTP, as the nodes' containerd mirror configuration names it; an
	// operator's is HTTPS and needs none).
	BinDir string
}

// NewHelmRelease makes the key pair (private key and stand-ins under dir,
// public key in the checkout) for a registry at registry (host:port/prefix).
func NewHelmRelease(ctx context.Context, op *Operator, registry, dir string) (*HelmRelease, error) {
	helm, err := releasetools.Built("helm")
	if err != nil {
		return nil, err
	}
	cosign, err := releasetools.Built("cosign")
	if err != nil {
		return nil, err
	}
	h := &HelmRelease{Helm: helm, Cosign: cosign, Registry: registry, BinDir: filepath.Join(dir, "helm-bin"), Key: filepath.Join(dir, "cosign.key")}
	if err := os.MkdirAll(h.BinDir, 0o755); err != nil {
		return nil, err
	}
	if err := release.GenerateKeyPair(ctx, cosign, filepath.Join(dir, "cosign")); err != nil {
		return nil, err
	}
	if err := copyFile(filepath.Join(dir, "cosign.pub"), filepath.Join(op.Dir, "cosign.pub")); err != nil {
		return nil, err
	}
	if err := writePlainHTTPStandIns(h.BinDir, helm, cosign); err != nil {
		return nil, err
	}
	return h, nil
}

// plainHTTPStandIns are the stand-ins' scripts: the real tool, with the
// plain-HTTP flags on the subcommands that reach a registry.
var plainHTTPStandIns = map[string]struct{ commands, flags string }{
	"helm":   {"install|upgrade|pull|push|show|template", "--plain-http"},
	"cosign": {"verify|verify-attestation|sign|attest|save|triangulate", "--allow-insecure-registry --allow-http-registry"},
}

func writePlainHTTPStandIns(dir, helm, cosign string) error {
	real := map[string]string{"helm": helm, "cosign": cosign}
	for name, s := range plainHTTPStandIns {
		script := fmt.Sprintf("#!/bin/sh\n# The test's registry is plain HTTP: %s gets %s on the commands that reach it.\ncase \"$1\" in\n%s) exec '%s' \"$@\" %s ;;\nesac\nexec '%s' \"$@\"\n",
			name, s.flags, s.commands, real[name], s.flags, real[name])
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// ChartVersionFor is the chart version that carries the build version
// (git describe of the checkout, e.g. a941ea6-dirty): build/VERSION's
// release with the build as a SemVer pre-release (g<build>, so that a
// build that starts with a digit stays valid).
func ChartVersionFor(op *Operator, version string) (string, error) {
	b, err := os.ReadFile(filepath.Join(op.Dir, "build", "VERSION"))
	if err != nil {
		return "", err
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(b)), "v")
	if version == strings.TrimSpace(string(b)) {
		return v, nil
	}
	pre := regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(version, "-")
	return v + "-g" + strings.Trim(pre, "-"), nil
}

// Publish signs the three images `make images REGISTRY=...` pushed for
// version (REGISTRY/NAME:version, by digest) and packages the checkout's
// chart with version as its appVersion, pushes it to REGISTRY/charts and
// signs it: what `make release` publishes, for the build under test. It
// returns the chart version.
func (h *HelmRelease) Publish(ctx context.Context, op *Operator, version string) (string, error) {
	c := release.Cosign{Bin: h.Cosign, Key: h.Key, Insecure: true}
	for _, spec := range imagebuild.Images {
		if err := c.Sign(ctx, h.Registry+"/"+spec.Name+":"+version); err != nil {
			return "", err
		}
	}
	chartVersion, err := ChartVersionFor(op, version)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "helm-chart-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	tgz, err := release.PackageChartAs(ctx, h.Helm, op.Dir, chartVersion, version, dir)
	if err != nil {
		return "", err
	}
	digest, err := release.PushChart(ctx, h.Helm, tgz, h.Registry, true)
	if err != nil {
		return "", err
	}
	return chartVersion, c.Sign(ctx, h.Registry+"/charts/"+release.ChartName+"@"+digest)
}

// Env is the environment of the guide's Helm blocks: the stand-ins and
// kubectl on PATH, the build (VERSION) and its chart (CHART_VERSION).
func (h *HelmRelease) Env(op *Operator, version, chartVersion string) []string {
	return []string{
		"PATH=" + h.BinDir + string(os.PathListSeparator) + filepath.Dir(op.Kubectl) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"VERSION=" + version,
		"CHART_VERSION=" + chartVersion,
		"HELM_CACHE_HOME=" + filepath.Join(filepath.Dir(h.Key), "helm-cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(filepath.Dir(h.Key), "helm-config"),
		"HELM_DATA_HOME=" + filepath.Join(filepath.Dir(h.Key), "helm-data"),
		"TUF_ROOT=" + filepath.Join(filepath.Dir(h.Key), "sigstore"),
	}
}

// VerifyRunning checks, offline against the public key, the signature of
// every image of ours the cluster runs (images: workload/container ->
// image, as the test's workloadImages lists them): each must be
// REGISTRY/NAME@DIGEST, what the nodes pulled. It returns the references
// checked.
func (h *HelmRelease) VerifyRunning(ctx context.Context, op *Operator, images map[string]string) ([]string, error) {
	refs := map[string]bool{}
	for w, img := range images {
		for _, spec := range imagebuild.Images {
			if strings.HasPrefix(img, h.Registry+"/"+spec.Name) {
				if !strings.Contains(img, "@sha256:") {
					return nil, fmt.Errorf("%s runs %s: not pinned by digest", w, img)
				}
				refs[img] = true
			}
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("none of the workloads runs an image of %s: %v", h.Registry, images)
	}
	c := release.Cosign{Bin: h.Cosign, Insecure: true}
	var checked []string
	for ref := range refs {
		if err := c.Verify(ctx, filepath.Join(op.Dir, "cosign.pub"), ref); err != nil {
			return nil, err
		}
		checked = append(checked, ref)
	}
	sort.Strings(checked)
	return checked, nil
}

// RunStep runs the Helm block name of build/README.md as the operator's
// RunStep runs a `step:` block: verbatim, with op's substitutions (its
// registry), the upstream address replaced, and Env's environment.
func (h *HelmRelease) RunStep(ctx context.Context, op *Operator, name, version, chartVersion string, env ...string) (string, error) {
	guide, err := h.helmGuide(op)
	if err != nil {
		return "", err
	}
	o := *op
	o.Substitutions = map[string]string{
		"upstream.host=192.0.2.1": fmt.Sprintf("upstream.host=%s", h.UpstreamHost),
		"upstream.port=6443":      fmt.Sprintf("upstream.port=%d", h.UpstreamPort),
	}
	for k, v := range op.Substitutions {
		o.Substitutions[k] = v
	}
	return o.RunStep(ctx, guide, name, append(h.Env(op, version, chartVersion), env...)...)
}

// HelmSteps lists the Helm blocks build/README.md marks, in order.
func HelmSteps(op *Operator) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(op.Dir, "build", "README.md"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), helmStepMarker); ok {
			names = append(names, strings.TrimSuffix(name, " -->"))
		}
	}
	return names, nil
}

// helmGuide writes build/README.md with its Helm markers read as step
// markers (bin/helm-guide.md in the checkout, beside what the guide makes),
// so that GuideStep finds the Helm blocks; it returns its path in the checkout.
func (h *HelmRelease) helmGuide(op *Operator) (string, error) {
	data, err := os.ReadFile(filepath.Join(op.Dir, "build", "README.md"))
	if err != nil {
		return "", err
	}
	const rel = "bin/helm-guide.md"
	if err := os.MkdirAll(filepath.Join(op.Dir, "bin"), 0o755); err != nil {
		return "", err
	}
	return rel, os.WriteFile(filepath.Join(op.Dir, rel), []byte(strings.ReplaceAll(string(data), helmStepMarker, stepMarker)), 0o644)
}
