package realnode

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
	"github.com/servicegroup/servicegroup/internal/releasetools"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// checkoutWith is an Operator whose checkout holds the repository's
// files (paths relative to its root).
func checkoutWith(t *testing.T, files ...string) *Operator {
	t.Helper()
	repo, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	op := &Operator{Dir: t.TempDir()}
	for _, f := range files {
		err := filepath.WalkDir(filepath.Join(repo, f), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(repo, p)
			return copyFile(p, filepath.Join(op.Dir, rel))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return op
}

// TestHelmSteps: build/README.md marks the Helm blocks the functions
// here run, each found as a step, each verifying the release's signatures
// or reading only what Env and the substitutions provide.
func TestHelmSteps(t *testing.T) {
	op := checkoutWith(t, "build/README.md")
	names, err := HelmSteps(op)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{HelmInstallStep, HelmUpgradeStep, HelmUninstallStep, HelmZoneStep, HelmMonitoringStep}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("Helm steps %v, want %v", names, want)
	}
	h := &HelmRelease{}
	guide, err := h.helmGuide(op)
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	locals := map[string]bool{"controller": true, "wrapper": true, "coredns": true, "i": true, "VERSION": true, "CHART_VERSION": true, "KEY": true, "differ": true, "NF": true /* awk's */}
	for _, n := range names {
		block, err := op.GuideStep(guide, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range vars.FindAllStringSubmatch(block, -1) {
			if !locals[m[1]] {
				t.Errorf("%s reads $%s, which neither the block nor Env sets", n, m[1])
			}
		}
		// Every block that pulls the chart checks it, and the images it changes.
		verifies := map[string]int{HelmInstallStep: 2, HelmUpgradeStep: 2, HelmUninstallStep: 0, HelmZoneStep: 1, HelmMonitoringStep: 1}
		if got := strings.Count(block, "cosign verify --key cosign.pub --insecure-ignore-tlog=true"); got != verifies[n] {
			t.Errorf("%s verifies %d things against cosign.pub, want %d (the images it changes, then the chart):\n%s", n, got, verifies[n], block)
		}
		// A tag of digits only (a commit like 4228755, or 20261129) is a
		// number to --set, which the chart's schema refuses.
		if strings.Contains(block, "--set image.tag=") {
			t.Errorf("%s sets image.tag with --set, not --set-string:\n%s", n, block)
		}
		if n == HelmInstallStep && (!strings.Contains(block, "upstream.host=192.0.2.1") || !strings.Contains(block, "upstream.port=6443")) {
			t.Errorf("%s does not set the upstream address RunStep replaces:\n%s", n, block)
		}
	}
	// The kustomize steps are untouched: the Helm markers are not steps.
	steps, err := op.GuideSteps("build/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if strings.HasPrefix(s, "helm-") {
			t.Errorf("build/README.md marks %s as a step TestRealNodes must run", s)
		}
	}
}

// TestPlainHTTPStandIns: the stand-ins add the plain-HTTP flags to the
// commands that reach a registry, and only to those.
func TestPlainHTTPStandIns(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "real")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writePlainHTTPStandIns(bin, fake, fake); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		args []string
		want string
	}{
		{"helm", []string{"install", "sg", "oci://r/c", "--set", "a=b c"}, "install sg oci://r/c --set a=b c --plain-http"},
		{"helm", []string{"show", "crds", "oci://r/c"}, "show crds oci://r/c --plain-http"},
		{"helm", []string{"uninstall", "sg"}, "uninstall sg"},
		{"cosign", []string{"verify", "--key", "k", "r/i:v"}, "verify --key k r/i:v --allow-insecure-registry --allow-http-registry"},
		{"cosign", []string{"generate-key-pair"}, "generate-key-pair"},
	} {
		out, err := exec.Command(filepath.Join(bin, c.tool), c.args...).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("%s %v ran the tool with %q, want %q", c.tool, c.args, got, c.want)
		}
	}
}

// TestChartVersionFor: a build's chart version is a SemVer pre-release of
// build/VERSION's release; the release itself is its plain version.
func TestChartVersionFor(t *testing.T) {
	op := checkoutWith(t, "build/VERSION")
	b, _ := os.ReadFile(filepath.Join(op.Dir, "build", "VERSION"))
	release := strings.TrimSpace(string(b))
	semver := regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-((0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?$`)
	for _, c := range []struct{ build, want string }{
		{release, strings.TrimPrefix(release, "v")},
		{"a941ea6-dirty", strings.TrimPrefix(release, "v") + "-ga941ea6-dirty"},
		{"0123abc", strings.TrimPrefix(release, "v") + "-g0123abc"},
		{"v0.1.0-3-gabc.1_x", strings.TrimPrefix(release, "v") + "-gv0-1-0-3-gabc-1-x"},
	} {
		got, err := ChartVersionFor(op, c.build)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want || !semver.MatchString(got) {
			t.Errorf("ChartVersionFor(%q) = %q, want %q (SemVer)", c.build, got, c.want)
		}
	}
}

// TestHelmPublishAndVerify publishes a build (three images standing in
// for `make images`' pushes) as the real-node test does, with the real
// cosign and helm on a registry on 127.0.0.1: the chart is pulled back
// with the build as its appVersion, each image verifies against the
// checkout's cosign.pub, and an image nobody signed, or one not pinned by
// digest, is refused.
func TestHelmPublishAndVerify(t *testing.T) {
	releasetools.Require(t, "helm")
	releasetools.Require(t, "cosign")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	reg := l.Addr().String() + "/servicegroup"
	const build = "a941ea6-dirty"
	digests := map[string]string{}
	for _, spec := range append(imagebuild.Images, imagebuild.Spec{Name: "unsigned"}) {
		idx, err := random.Index(64, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(reg+"/"+spec.Name+":"+build, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteIndex(ref, idx); err != nil {
			t.Fatal(err)
		}
		d, _ := idx.Digest()
		digests[spec.Name] = reg + "/" + spec.Name + "@" + d.String()
	}
	op := checkoutWith(t, "build/VERSION", "build/chart")
	t.Setenv("COSIGN_PASSWORD", "")
	h, err := NewHelmRelease(ctx, op, reg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	chartVersion, err := h.Publish(ctx, op, build)
	if err != nil {
		t.Fatal(err)
	}
	show, err := exec.Command(filepath.Join(h.BinDir, "helm"), "show", "chart", "oci://"+reg+"/charts/servicegroup", "--version", chartVersion).CombinedOutput()
	if err != nil || !strings.Contains(string(show), "appVersion: "+build) {
		t.Errorf("helm show chart: %v\n%s", err, show)
	}
	// The install block's checks, as written up to its first kubectl
	// command, against the real cosign: each digest it pins is the one
	// pushed, and the chart's signature verifies.
	readme := checkoutWith(t, "build/README.md")
	guide, err := h.helmGuide(readme)
	if err != nil {
		t.Fatal(err)
	}
	block, err := readme.GuideStep(guide, HelmInstallStep)
	if err != nil {
		t.Fatal(err)
	}
	checks, _, ok := strings.Cut(block, "\nkubectl ")
	if !ok {
		t.Fatalf("%s has no kubectl command:\n%s", HelmInstallStep, block)
	}
	checks = strings.ReplaceAll(checks, "registry.example/edge", reg) + "\necho \"$controller $wrapper $coredns\"\n"
	cmd := exec.CommandContext(ctx, "sh", "-eu", "-c", checks)
	cmd.Dir = op.Dir
	cmd.Env = append(os.Environ(), h.Env(op, build, chartVersion)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the install block's checks: %v\n%s", err, checks)
	}
	pinned := strings.Fields(string(out))
	for i, n := range []string{"application-grid-controller", "application-grid-wrapper", "coredns-gridhosts"} {
		if i >= len(pinned) || reg+"/"+n+"@"+pinned[i] != digests[n] {
			t.Errorf("the install block pins %v for %s, want %s", pinned, n, digests[n])
		}
	}

	running := map[string]string{
		"Deployment/servicegroup-system/application-grid-controller/controller": digests["application-grid-controller"],
		"DaemonSet/edge-system/application-grid-wrapper/wrapper":                digests["application-grid-wrapper"],
		"DaemonSet/edge-system/coredns-gridhosts/coredns":                       digests["coredns-gridhosts"],
		"DaemonSet/kube-system/kube-proxy-edge/kube-proxy":                      "registry.k8s.io/kube-proxy:v1.37.1",
	}
	checked, err := h.VerifyRunning(ctx, op, running)
	if err != nil || len(checked) != 3 {
		t.Fatalf("VerifyRunning: %v (checked %v)", err, checked)
	}
	running["DaemonSet/edge-system/coredns-gridhosts/coredns"] = strings.Replace(digests["unsigned"], "/unsigned@", "/coredns-gridhosts@", 1)
	// The unsigned index is pushed under its own name: copy it under
	// coredns-gridhosts by digest, as a registry would serve a substituted image.
	src, _ := name.ParseReference(digests["unsigned"], name.Insecure)
	idx, err := remote.Index(src)
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := name.ParseReference(running["DaemonSet/edge-system/coredns-gridhosts/coredns"], name.Insecure)
	if err := remote.WriteIndex(dst, idx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.VerifyRunning(ctx, op, running); err == nil {
		t.Error("an image nobody signed verified")
	}
	running["DaemonSet/edge-system/coredns-gridhosts/coredns"] = reg + "/coredns-gridhosts:" + build
	if _, err := h.VerifyRunning(ctx, op, running); err == nil || !strings.Contains(err.Error(), "not pinned by digest") {
		t.Errorf("an image run by tag: %v", err)
	}
}
