package realnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestCachedGzipLayer: the layer's digests are tarball.LayerFromFile's,
// kept beside the file and read from there while the file is unchanged
// (a digest planted in the cache shows), computed again once it changed;
// the layer reads the file's content either way.
func TestCachedGzipLayer(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	data := []byte("#!/bin/sh\necho hello\n")
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "hello", Mode: 0o755, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(t.TempDir(), "layer.tar.gz")
	if err := os.WriteFile(gz, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := tarball.LayerFromFile(gz)
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := want.Digest()
	wantDiffID, _ := want.DiffID()

	check := func(what, diffID string) {
		t.Helper()
		l, err := cachedGzipLayer(gz)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		digest, _ := l.Digest()
		got, _ := l.DiffID()
		size, _ := l.Size()
		mt, _ := l.MediaType()
		if digest != wantDigest || got.String() != diffID || size != int64(buf.Len()) || mt != "application/vnd.docker.image.rootfs.diff.tar.gzip" {
			t.Errorf("%s: digest %s diffID %s size %d %s; want %s %s %d", what, digest, got, size, mt, wantDigest, diffID, buf.Len())
		}
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		h, err := tar.NewReader(rc).Next()
		if err != nil || h.Name != "hello" {
			t.Errorf("%s: uncompressed: %v %v", what, h, err)
		}
		_, _ = io.Copy(io.Discard, rc)
	}
	check("first", wantDiffID.String())
	var d layerDigests
	b, err := os.ReadFile(gz + ".digests")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil || d.DiffID != wantDiffID.String() || d.Digest != wantDigest.String() {
		t.Fatalf("cache %s: %v", b, err)
	}
	planted := "sha256:" + string(bytes.Repeat([]byte("ab"), 32))
	d.DiffID = planted
	if b, err = json.Marshal(d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gz+".digests", b, 0o644); err != nil {
		t.Fatal(err)
	}
	check("cached", planted)
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(gz, later, later); err != nil {
		t.Fatal(err)
	}
	check("file changed", wantDiffID.String())
}
