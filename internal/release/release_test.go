package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
	"github.com/servicegroup/servicegroup/internal/releasetools"
	"github.com/servicegroup/servicegroup/internal/testbin"
)

// keyPair makes a throwaway cosign key pair (password-protected) in a
// temporary directory and returns the private key's and the public key's
// paths; COSIGN_PASSWORD is set for the test.
func keyPair(t *testing.T, cosignBin string) (key, pub string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "throwaway-test-password")
	cmd := exec.Command(cosignBin, "generate-key-pair", "--output-key-prefix", filepath.Join(dir, "cosign"))
	cmd.Env = append(os.Environ(), "TUF_ROOT="+filepath.Join(dir, "tuf"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// testRegistry serves go-containerregistry's registry on 127.0.0.1 for
// the test.
func testRegistry(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(discardLogger())), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

func tool(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	out, err := runTool(context.Background(), bin, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRelease makes a release (images for linux/amd64) into a registry on
// 127.0.0.1 with a throwaway key and checks it as an operator would, with
// the real cosign, helm and krew: every image's signature and SBOM
// attestation verify offline against the public key (and not against
// another key), from the registry and from the saved layouts; the SBOMs
// are valid CycloneDX; the chart is an OCI artifact whose default render
// runs the release's images; the krew manifest installs the plugin from
// its archive (and refuses an archive that is not the one it names); the
// checksums match.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the three images and kubectl-grid")
	}
	cosignBin := releasetools.Require(t, "cosign")
	helm := releasetools.Require(t, "helm")
	krew := releasetools.Require(t, "krew")
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(root, "build", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(version))
	key, pub := keyPair(t, cosignBin)
	reg := testRegistry(t) + "/edge"
	out := filepath.Join(t.TempDir(), "release")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := Make(ctx, Options{
		Root: root, Version: v, SourceDate: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Out: out,
		Registry: reg, Insecure: true, Platforms: []v1.Platform{{OS: "linux", Architecture: "amd64"}},
		KrewPlatforms: []string{"linux/amd64"}, DownloadURL: "https://example.invalid/" + v,
		Key: key, Helm: helm, Cosign: cosignBin, Log: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release made in %s", time.Since(start).Round(time.Second))

	published, err := os.ReadFile(filepath.Join(out, PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(pub)
	if !bytes.Equal(published, want) {
		t.Errorf("%s is not the signing key's public key", PublicKey)
	}
	_, otherPub := keyPair(t, cosignBin)
	schema := cyclonedxSchema(t)
	insecure := []string{"--allow-insecure-registry", "--allow-http-registry"}
	for _, spec := range imagebuild.Images {
		ref := reg + "/" + spec.Name + "@" + res.Images[spec.Name].String()
		tool(t, cosignBin, nil, append([]string{"verify", "--key", pub, "--insecure-ignore-tlog=true"}, append(insecure, ref)...)...)
		if o, err := runTool(ctx, cosignBin, nil, append([]string{"verify", "--key", otherPub, "--insecure-ignore-tlog=true"}, append(insecure, ref)...)...); err == nil {
			t.Errorf("%s verifies against another key:\n%s", ref, o)
		}
		tool(t, cosignBin, nil, "verify", "--key", pub, "--insecure-ignore-tlog=true", "--local-image", filepath.Join(out, SignedDir, spec.Name))

		sbom, err := os.ReadFile(filepath.Join(out, SBOMDir, spec.Name+".cdx.json"))
		if err != nil {
			t.Fatal(err)
		}
		validateSBOM(t, schema, sbom)
		att := tool(t, cosignBin, nil, append([]string{"verify-attestation", "--key", pub, "--type", "cyclonedx", "--insecure-ignore-tlog=true"}, append(insecure, ref)...)...)
		if pred := attestedPredicate(t, att); !jsonEqual(t, pred, sbom) {
			t.Errorf("%s: the attested SBOM is not %s.cdx.json", spec.Name, spec.Name)
		}
	}

	chartVersion := ChartVersion(v)
	show := tool(t, helm, nil, "show", "chart", "oci://"+reg+"/charts/"+ChartName, "--version", chartVersion, "--plain-http")
	if !strings.Contains(show, "appVersion: "+v) || !strings.Contains(show, "version: "+chartVersion) {
		t.Errorf("helm show chart:\n%s", show)
	}
	render := tool(t, helm, nil, "template", "servicegroup", "oci://"+reg+"/charts/"+ChartName, "--version", chartVersion, "--plain-http",
		"--set", "image.repository="+reg,
		"--set", "image.digests.application-grid-controller="+res.Images["application-grid-controller"].String())
	if !strings.Contains(render, "image: "+reg+"/application-grid-controller@"+res.Images["application-grid-controller"].String()) ||
		!strings.Contains(render, "image: "+reg+"/application-grid-wrapper:"+v) {
		t.Errorf("the pushed chart does not run the release's images:\n%s", render)
	}

	plugin := filepath.Join(out, PluginDir)
	krewRoot := t.TempDir()
	archive := filepath.Join(plugin, Archive(v, "linux/amd64"))
	tool(t, krew, []string{"KREW_ROOT=" + krewRoot}, "install", "--manifest="+filepath.Join(plugin, KrewManifest), "--archive="+archive)
	installed, err := os.ReadFile(filepath.Join(krewRoot, "bin", "kubectl-grid"))
	if err != nil {
		t.Fatalf("krew installed no kubectl-grid: %v", err)
	}
	if !bytes.Equal(installed, fileInTarGz(t, archive, "kubectl-grid")) {
		t.Error("the installed kubectl-grid is not the archive's")
	}
	if help := tool(t, filepath.Join(krewRoot, "bin", "kubectl-grid"), nil, "--help"); !strings.Contains(help, "doctor") {
		t.Errorf("kubectl-grid --help:\n%s", help)
	}
	var manifest krewPlugin
	b, _ := os.ReadFile(filepath.Join(plugin, KrewManifest))
	if err := yaml.Unmarshal(b, &manifest); err != nil || manifest.Metadata["name"] != "grid" || manifest.Spec.Version != v ||
		manifest.Spec.Platforms[0].URI != "https://example.invalid/"+v+"/"+Archive(v, "linux/amd64") {
		t.Errorf("krew manifest %+v (%v)", manifest, err)
	}
	// An archive other than the manifest's: krew checks the checksum.
	other := filepath.Join(t.TempDir(), Archive(v, "linux/amd64"))
	if err := os.WriteFile(other, append(fileBytes(t, archive), 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := runTool(ctx, krew, []string{"KREW_ROOT=" + t.TempDir()}, "install", "--manifest="+filepath.Join(plugin, KrewManifest), "--archive="+other); err == nil {
		t.Errorf("krew installed an archive whose checksum is not the manifest's:\n%s", o)
	}
	for _, dir := range []string{out, plugin} {
		cmd := exec.Command("sha256sum", "--check", "--strict", Checksums)
		cmd.Dir = dir
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum --check in %s: %v\n%s", dir, err, o)
		}
	}
}

// TestReleaseRefuses: a release needs a semantic version equal to
// build/VERSION and a signing key, and says so before building anything.
func TestReleaseRefuses(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "build", "VERSION"))
	v := strings.TrimSpace(string(b))
	ok := Options{Root: root, Version: v, Out: t.TempDir(), Key: filepath.Join(root, "LICENSE"), Helm: "helm", Cosign: "cosign",
		Platforms: imagebuild.DefaultPlatforms, KrewPlatforms: DefaultKrewPlatforms}
	if err := ok.check(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, c := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.Version = "0.1.0" }, "semantic versioning"},
		{func(o *Options) { o.Version = "v9.9.9" }, "build/VERSION"},
		{func(o *Options) { o.Key = "" }, "COSIGN_KEY"},
		{func(o *Options) { o.Key = filepath.Join(root, "no-such-key") }, "no-such-key"},
	} {
		o := ok
		c.edit(&o)
		if err := o.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %q, got %v", c.want, err)
		}
	}
}

// attestedPredicate is the predicate of the first attestation cosign
// verify-attestation printed (a DSSE envelope per line).
func attestedPredicate(t *testing.T, out string) []byte {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		var env struct {
			Payload string `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &env) != nil || env.Payload == "" {
			continue
		}
		p, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var stmt struct {
			Predicate json.RawMessage `json:"predicate"`
		}
		if err := json.Unmarshal(p, &stmt); err != nil {
			t.Fatal(err)
		}
		return stmt.Predicate
	}
	t.Fatalf("no attestation in:\n%s", out)
	return nil
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

func fileBytes(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fileInTarGz(t *testing.T, archive, name string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(fileBytes(t, archive)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no %s", archive, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
