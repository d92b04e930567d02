package release

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// ChartName is the chart's name (build/chart/Chart.yaml).
const ChartName = "servicegroup"

var pushedDigest = regexp.MustCompile(`(?m)^Digest: (sha256:[0-9a-f]{64})$`)

// chart packages build/chart at the release's version (appVersion: the
// release, so the chart runs its images), pushes it to REGISTRY/charts as
// an OCI artifact, signs it and saves it with its signature.
func (o *Options) chart(ctx context.Context, c Cosign, reg string, insecure bool) (string, error) {
	dir := filepath.Join(o.Out, ChartDir)
	tgz, err := PackageChart(ctx, o.Helm, o.Root, o.Version, dir)
	if err != nil {
		return "", err
	}
	digest, err := PushChart(ctx, o.Helm, tgz, reg, insecure)
	if err != nil {
		return "", err
	}
	ref := reg + "/charts/" + ChartName + "@" + digest
	if err := c.Sign(ctx, ref); err != nil {
		return "", err
	}
	if err := c.Verify(ctx, filepath.Join(o.Out, PublicKey), ref); err != nil {
		return "", err
	}
	if err := c.Save(ctx, ref, filepath.Join(dir, "signed")); err != nil {
		return "", err
	}
	return "oci://" + reg + "/charts/" + ChartName + ":" + ChartVersion(o.Version) + " (" + digest + ")", nil
}

// ChartVersion is the chart's version for release version (no leading v).
func ChartVersion(version string) string { return strings.TrimPrefix(version, "v") }

// PackageChart packages the chart of the checkout at root as version
// (chart version without the v, appVersion with it) into dir and returns
// the package's path.
func PackageChart(ctx context.Context, helm, root, version, dir string) (string, error) {
	return PackageChartAs(ctx, helm, root, ChartVersion(version), version, dir)
}

// PackageChartAs packages the chart at root with chart version
// chartVersion and appVersion appVersion (the tag its images default to).
func PackageChartAs(ctx context.Context, helm, root, chartVersion, appVersion, dir string) (string, error) {
	if _, err := runTool(ctx, helm, nil, "package", filepath.Join(root, "build", "chart"), "--version", chartVersion, "--app-version", appVersion, "--destination", dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, ChartName+"-"+chartVersion+".tgz"), nil
}

// PushChart pushes the packaged chart tgz to oci://REGISTRY/charts and
// returns the artifact's digest.
func PushChart(ctx context.Context, helm, tgz, reg string, insecure bool) (string, error) {
	args := []string{"push", tgz, "oci://" + reg + "/charts"}
	if insecure {
		args = append(args, "--plain-http")
	}
	out, err := runTool(ctx, helm, nil, args...)
	if err != nil {
		return "", err
	}
	m := pushedDigest.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("helm push printed no digest:\n%s", out)
	}
	return m[1], nil
}
