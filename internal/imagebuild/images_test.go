package imagebuild

import (
	"archive/tar"
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image builder is tested on fixtures sized for a test: each shipped
// Spec (name, entrypoint, ports) with testdata/hello as its program, which
// links in a second for any platform and compresses in milliseconds even
// under -race, where the shipped binaries (tens of MB each) cost minutes.
// TestShippedImages is the one full-size check: what only the real
// binaries show is said there.

const testVersion = "v0.0.0-imagetest"

var testDate = time.Unix(1700000000, 0).UTC()

func testOptions(t *testing.T, date time.Time, plats ...v1.Platform) Options {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Version: testVersion, Revision: "0123456789abcdef", SourceDate: date, Platforms: plats,
		Go: GoBuild{Dir: root, LDFlags: VersionLDFlags(testVersion)},
	}
}

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}

	builtOnce sync.Once
	built     map[string]v1.Hash // image name -> index digest
	builtDir  string
	builtErr  error
)

// fixture is spec with testdata/hello as its program.
func fixture(spec Spec) Spec {
	spec.Package = helloSpec.Package
	return spec
}

// buildAll builds and writes the fixture of each of the three images for
// amd64 once per test binary.
func buildAll(t *testing.T) (string, map[string]v1.Hash) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the fixture images")
	}
	builtOnce.Do(func() {
		builtDir, builtErr = os.MkdirTemp("", "imagebuild-test-")
		if builtErr != nil {
			return
		}
		built = map[string]v1.Hash{}
		o := testOptions(t, testDate, amd64)
		for _, spec := range Images {
			idx, err := Build(context.Background(), fixture(spec), o)
			if err != nil {
				builtErr = err
				return
			}
			if err := WriteLayout(filepath.Join(builtDir, spec.Name), "servicegroup/"+spec.Name+":"+testVersion, testVersion, idx); err != nil {
				builtErr = err
				return
			}
			if built[spec.Name], err = idx.Digest(); err != nil {
				builtErr = err
				return
			}
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtDir, built
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// TestImagesReadBack reads each fixture's written layout back and checks
// what a container runtime would use: platform, entrypoint, user, the exact
// file list (no shell, nothing else), and that the binary runs --version.
func TestImagesReadBack(t *testing.T) {
	dir, digests := buildAll(t)
	for _, spec := range Images {
		t.Run(spec.Name, func(t *testing.T) {
			idx, err := ReadLayout(filepath.Join(dir, spec.Name), testVersion)
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := idx.Digest(); d != digests[spec.Name] {
				t.Errorf("read back digest %s, built %s", d, digests[spec.Name])
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if im.MediaType != types.OCIImageIndex || len(im.Manifests) != 1 {
				t.Fatalf("index: media type %s with %d manifests, want one OCI manifest", im.MediaType, len(im.Manifests))
			}
			if p := im.Manifests[0].Platform; p == nil || p.OS != "linux" || p.Architecture != "amd64" || p.Variant != "" {
				t.Errorf("index platform %v, want linux/amd64", p)
			}
			img, err := idx.Image(im.Manifests[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != "amd64" {
				t.Errorf("config platform %s/%s", cf.OS, cf.Architecture)
			}
			if !slices.Equal(cf.Config.Entrypoint, []string{spec.Binary}) || len(cf.Config.Cmd) != 0 {
				t.Errorf("entrypoint %q cmd %q, want [%s]", cf.Config.Entrypoint, cf.Config.Cmd, spec.Binary)
			}
			if cf.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532", cf.Config.User)
			}
			if !cf.Created.Time.Equal(testDate) {
				t.Errorf("created %s, want %s", cf.Created.Time, testDate)
			}
			files := extract(t, img)
			want := slices.Sorted(slices.Values([]string{"etc", "etc/group", "etc/nsswitch.conf", "etc/passwd",
				"home", "home/nonroot", "root", "tmp", strings.TrimPrefix(spec.Binary, "/")}))
			if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, want) {
				t.Errorf("files %q, want exactly %q (no shell, nothing else)", got, want)
			}
			if h := files["tmp"]; h == nil || h.Mode&0o7777 != 0o1777 {
				t.Errorf("/tmp header %+v, want mode 1777", h)
			}
			if h := files["home/nonroot"]; h == nil || h.Uid != NonRoot || h.Gid != NonRoot {
				t.Errorf("/home/nonroot header %+v, want owned by 65532", h)
			}
			for name, h := range files {
				if !h.ModTime.Equal(testDate) {
					t.Errorf("%s mtime %s, want %s", name, h.ModTime, testDate)
				}
			}
			runVersion(t, img, spec)
		})
	}
}

// extract returns the headers of the image's flattened file system.
func extract(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

// runVersion extracts the entrypoint from the image and runs its version flag.
func runVersion(t *testing.T, img v1.Image, spec Spec) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the amd64 binary runs on linux/amd64 only")
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not found in the image: %v", spec.Binary, err)
		}
		if "/"+h.Name != spec.Binary {
			continue
		}
		if h.Mode&0o111 == 0 {
			t.Errorf("%s mode %o is not executable", spec.Binary, h.Mode)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		checkVersion(t, spec, data)
		return
	}
}

// checkVersion runs bin (spec's binary) with --version: it must print
// testVersion.
func checkVersion(t *testing.T, spec Spec, data []byte) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the amd64 binary runs on linux/amd64 only")
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(spec.Binary))
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", spec.Binary, err, out)
	}
	if !strings.Contains(string(out), testVersion) {
		t.Errorf("%s --version printed %q, want it to contain %q", spec.Binary, out, testVersion)
	}
}

// TestBuildIsReproducible builds every fixture again from scratch (fresh
// work directory, fresh link) and expects the same digests, for amd64 and
// for every default platform; a different source date must change them, or
// the date would not be in the images at all.
func TestBuildIsReproducible(t *testing.T) {
	_, first := buildAll(t)
	o := testOptions(t, testDate, amd64)
	o.WorkDir = t.TempDir()
	for _, spec := range Images {
		if d := buildDigest(t, fixture(spec), o); d != first[spec.Name] {
			t.Errorf("%s: second build %s, first %s", spec.Name, d, first[spec.Name])
		}
	}
	all := testOptions(t, testDate, DefaultPlatforms...)
	if a, b := buildDigest(t, helloSpec, all), buildDigest(t, helloSpec, all); a != b {
		t.Errorf("%s for %d platforms: first build %s, second %s", helloSpec.Name, len(DefaultPlatforms), a, b)
	}
	later := testOptions(t, testDate.Add(time.Second), amd64)
	if d := buildDigest(t, fixture(Images[0]), later); d == first[Images[0].Name] {
		t.Errorf("%s: a different source date gave the same digest %s", Images[0].Name, d)
	}
}

// TestShippedImages is the one full-size check: the shipped programs
// (linux/amd64), which the fixtures stand in for everywhere else. Only they
// show that each Spec's package is a program that builds static with CGO
// off and runs, printing the version the builder stamps (each binary is
// run); and that a real link is reproducible: the fixture has no
// dependency, while the shipped binaries link hundreds of modules whose
// build information goes into each binary. That is checked on
// coredns-gridhosts, whose dependency graph holds nearly all of the other
// two's (client-go, apimachinery, Prometheus's client) and CoreDNS's
// plugins besides: its image is built twice from scratch and must have one
// digest, and its binary is run from the image. The other two are linked
// alone: compressing and reading back a layer is the same code for any
// size, and costs minutes per binary under -race.
func TestShippedImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the three shipped binaries")
	}
	const full = "coredns-gridhosts"
	o := testOptions(t, testDate, amd64)
	for _, spec := range Images {
		t.Run(spec.Name, func(t *testing.T) {
			if spec.Name != full {
				bin, err := o.Go.Build(t.Context(), spec.Package, amd64, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				checkVersion(t, spec, bin)
				return
			}
			idx, err := Build(t.Context(), spec, o)
			if err != nil {
				t.Fatal(err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			img, err := idx.Image(im.Manifests[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cf.Config.Entrypoint, []string{spec.Binary}) {
				t.Errorf("entrypoint %q, want [%s]", cf.Config.Entrypoint, spec.Binary)
			}
			runVersion(t, img, spec)
			first, err := idx.Digest()
			if err != nil {
				t.Fatal(err)
			}
			again := o
			again.WorkDir = t.TempDir()
			if d := buildDigest(t, spec, again); d != first {
				t.Errorf("second build %s, first %s", d, first)
			}
		})
	}
}

// buildDigest builds spec and returns its index's digest.
func buildDigest(t *testing.T, spec Spec, o Options) v1.Hash {
	t.Helper()
	idx, err := Build(t.Context(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
