package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

var helloSpec = Spec{Name: "hello", Package: "./internal/imagebuild/testdata/hello", Binary: "/hello"}

// TestMultiArchIndex builds testdata/hello for the default platforms and
// checks each entry of the index: its platform, its config's platform, and
// the ELF machine of the binary inside (the cross-compile really happened).
func TestMultiArchIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles for three platforms")
	}
	idx, err := Build(context.Background(), helloSpec, testOptions(t, testDate, DefaultPlatforms...))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hello")
	if err := WriteLayout(dir, "servicegroup/hello:"+testVersion, testVersion, idx); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLayout(dir, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	im, err := back.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM}
	if len(im.Manifests) != len(DefaultPlatforms) {
		t.Fatalf("%d manifests, want %d", len(im.Manifests), len(DefaultPlatforms))
	}
	for i, want := range DefaultPlatforms {
		d := im.Manifests[i]
		if d.Platform == nil || !d.Platform.Equals(want) {
			t.Errorf("manifest %d platform %v, want %v", i, d.Platform, want)
			continue
		}
		img, err := back.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != want.OS || cf.Architecture != want.Architecture || cf.Variant != want.Variant {
			t.Errorf("%s: config says %s/%s/%s", want.String(), cf.OS, cf.Architecture, cf.Variant)
		}
		f, err := elf.NewFile(bytes.NewReader(fileIn(t, img, "hello")))
		if err != nil {
			t.Fatalf("%s: /hello is not ELF: %v", want.String(), err)
		}
		if f.Machine != machines[want.Architecture] {
			t.Errorf("%s: /hello is for %s", want.String(), f.Machine)
		}
		if f.Section(".interp") != nil {
			t.Errorf("%s: /hello is dynamically linked", want.String())
		}
	}
}

// TestPushToRegistry pushes an index to go-containerregistry's own registry
// on 127.0.0.1 and pulls it back by tag: same digest, same platforms.
func TestPushToRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	idx, err := Build(context.Background(), helloSpec, testOptions(t, testDate, amd64))
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/servicegroup/hello:" + testVersion
	if err := Push(context.Background(), ref, idx, true); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if got, _ := pulled.Digest(); got != want {
		t.Errorf("pulled %s, pushed %s", got, want)
	}
	img, err := pulled.Image(mustFirst(t, pulled))
	if err != nil {
		t.Fatal(err)
	}
	if len(fileIn(t, img, "hello")) == 0 {
		t.Error("pulled image has an empty /hello")
	}
}

func mustFirst(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) == 0 {
		t.Fatalf("index manifest: %v (%d entries)", err, len(im.Manifests))
	}
	return im.Manifests[0].Digest
}

// fileIn returns the contents of one file of the image.
func fileIn(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", path, err)
		}
		if h.Name == path {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
