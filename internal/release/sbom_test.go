package release

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
	"github.com/servicegroup/servicegroup/internal/testbin"
)

var helloSpec = imagebuild.Spec{Name: "hello", Package: "./internal/imagebuild/testdata/hello", Binary: "/hello"}

// cyclonedxSchema compiles the vendored CycloneDX 1.6 schema
// (testdata/cyclonedx/SOURCE.md).
func cyclonedxSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	for _, f := range []string{"bom-1.6.schema.json", "spdx.schema.json", "jsf-0.82.schema.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "cyclonedx", f))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.AddResource("http://cyclonedx.org/schema/"+f, doc); err != nil {
			t.Fatal(err)
		}
	}
	c.AssertFormat()
	s, err := c.Compile("http://cyclonedx.org/schema/bom-1.6.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validateSBOM checks b against the CycloneDX 1.6 schema.
func validateSBOM(t *testing.T, schema *jsonschema.Schema, b []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("SBOM is not valid CycloneDX %s: %v", SBOMSpecVersion, err)
	}
}

// TestSBOMOfImage builds a small image for the three platforms and checks
// its SBOM: valid against the CycloneDX 1.6 schema, one image and one
// binary per platform with the binary's real hash, the modules from its
// Go build information, the base layer's files, and the same bytes for
// the same image.
func TestSBOMOfImage(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles for three platforms")
	}
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	date := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	idx, err := imagebuild.Build(context.Background(), helloSpec, imagebuild.Options{
		Version: "v0.0.1", SourceDate: date, Platforms: imagebuild.DefaultPlatforms,
		Go: imagebuild.GoBuild{Dir: root, LDFlags: imagebuild.VersionLDFlags("v0.0.1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := SBOM(helloSpec, "v0.0.1", date, idx)
	if err != nil {
		t.Fatal(err)
	}
	validateSBOM(t, cyclonedxSchema(t), b)
	again, err := SBOM(helloSpec, "v0.0.1", date, idx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Error("two SBOMs of one image differ")
	}

	var doc bom
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	digest, _ := idx.Digest()
	if doc.Metadata.Component.Hashes[0].Content != digest.Hex || doc.Metadata.Timestamp != "2026-11-01T00:00:00Z" {
		t.Errorf("metadata %+v: want the index digest %s and the source date", doc.Metadata, digest)
	}
	im, _ := idx.IndexManifest()
	byRef := map[string]component{}
	for _, c := range doc.Components {
		byRef[c.BOMRef] = c
	}
	for _, d := range im.Manifests {
		plat := d.Platform.String()
		img, ok := byRef["image:"+plat]
		if !ok || img.Hashes[0].Content != d.Digest.Hex {
			t.Errorf("%s: image component %+v, want digest %s", plat, img, d.Digest)
		}
		bin, ok := byRef["binary:"+plat]
		if !ok {
			t.Fatalf("%s: no binary component", plat)
		}
		image, _ := idx.Image(d.Digest)
		layers, _ := image.Layers()
		files, err := layerFiles(layers[1])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256Hex(files["hello"])
		if bin.Hashes[0].Content != sum {
			t.Errorf("%s: binary hash %s, want the shipped file's %s", plat, bin.Hashes[0].Content, sum)
		}
		if !slices.Contains(bin.Properties, property{Name: "go:build:GOARCH", Value: d.Platform.Architecture}) ||
			!slices.Contains(bin.Properties, property{Name: "go:main", Value: "github.com/servicegroup/servicegroup/internal/imagebuild/testdata/hello"}) {
			t.Errorf("%s: binary properties %v lack its GOARCH or main package", plat, bin.Properties)
		}
	}
	var deps []string
	for _, d := range doc.Dependencies {
		if d.Ref == "binary:linux/amd64" {
			deps = d.DependsOn
		}
	}
	if len(deps) == 0 || !strings.HasPrefix(deps[0], "go:stdlib@go") {
		t.Errorf("linux/amd64 binary depends on %v, want the Go standard library first", deps)
	}
	for _, f := range []string{"/etc/passwd", "/etc/group", "/etc/nsswitch.conf"} {
		if c, ok := byRef["file:"+f]; !ok || c.Type != "file" || len(c.Hashes) != 1 {
			t.Errorf("base file %s: %+v", f, c)
		}
	}
}

// TestSBOMSchemaRefuses: the schema check can fail (a document without
// its format, or with a wrong hash algorithm, is refused).
func TestSBOMSchemaRefuses(t *testing.T) {
	schema := cyclonedxSchema(t)
	for _, bad := range []string{
		`{"specVersion":"1.6","version":1}`,
		`{"bomFormat":"CycloneDX","specVersion":"1.6","components":[{"type":"file","name":"x","hashes":[{"alg":"CRC32","content":"00"}]}]}`,
	} {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
