package release

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
)

// SBOMSpecVersion is the CycloneDX release of the SBOMs (JSON).
const SBOMSpecVersion = "1.6"

// The CycloneDX 1.6 JSON document, as far as these SBOMs use it.
type (
	bom struct {
		BOMFormat    string       `json:"bomFormat"`
		SpecVersion  string       `json:"specVersion"`
		SerialNumber string       `json:"serialNumber"`
		Version      int          `json:"version"`
		Metadata     metadata     `json:"metadata"`
		Components   []component  `json:"components"`
		Dependencies []dependency `json:"dependencies"`
	}
	metadata struct {
		Timestamp string     `json:"timestamp"`
		Tools     tools      `json:"tools"`
		Component component  `json:"component"`
		Supplier  *entity    `json:"supplier,omitempty"`
		Licenses  []licenses `json:"licenses,omitempty"`
	}
	tools struct {
		Components []component `json:"components"`
	}
	entity struct {
		Name string   `json:"name"`
		URL  []string `json:"url,omitempty"`
	}
	licenses struct {
		License license `json:"license"`
	}
	license struct {
		ID string `json:"id"`
	}
	component struct {
		Type       string     `json:"type"`
		BOMRef     string     `json:"bom-ref,omitempty"`
		Name       string     `json:"name"`
		Version    string     `json:"version,omitempty"`
		PURL       string     `json:"purl,omitempty"`
		Hashes     []hash     `json:"hashes,omitempty"`
		Properties []property `json:"properties,omitempty"`
	}
	hash struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	}
	property struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	dependency struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	}
)

// SBOM is the CycloneDX 1.6 JSON SBOM of one multi-arch image as built:
// per platform the image, the Go binary in it with its module
// dependencies, read from the binary's own build information
// (debug/buildinfo), and the files of the base layer with their SHA-256.
// Everything is read back from the index's layers, so the SBOM describes
// the bytes that ship. Its timestamp is the build's source date and its
// serial number derives from the index digest: the same image gives the
// same SBOM.
func SBOM(spec imagebuild.Spec, version string, created time.Time, idx v1.ImageIndex) ([]byte, error) {
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	root := component{
		Type: "container", BOMRef: "image", Name: spec.Name, Version: version,
		PURL:   ociPURL(spec.Name, digest, nil),
		Hashes: []hash{{Alg: "SHA-256", Content: digest.Hex}},
	}
	b := bom{
		BOMFormat: "CycloneDX", SpecVersion: SBOMSpecVersion, Version: 1,
		SerialNumber: serial(digest),
		Metadata: metadata{
			Timestamp: created.UTC().Format(time.RFC3339),
			Tools:     tools{Components: []component{{Type: "application", Name: "servicegroup-release", Version: version}}},
			Component: root,
			Supplier:  &entity{Name: "The servicegroup Authors", URL: []string{"https://github.com/servicegroup/servicegroup"}},
			Licenses:  []licenses{{License: license{ID: "Apache-2.0"}}},
		},
	}
	modules := map[string]component{}
	files := map[string]component{}
	var rootDeps []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return nil, fmt.Errorf("index entry %s has no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		layers, err := img.Layers()
		if err != nil {
			return nil, err
		}
		if len(layers) != 2 {
			return nil, fmt.Errorf("%s %s: %d layers, want the base and the binary", spec.Name, d.Platform, len(layers))
		}
		base, err := layerFiles(layers[0])
		if err != nil {
			return nil, fmt.Errorf("%s %s base layer: %w", spec.Name, d.Platform, err)
		}
		top, err := layerFiles(layers[1])
		if err != nil {
			return nil, fmt.Errorf("%s %s binary layer: %w", spec.Name, d.Platform, err)
		}
		bin, ok := top[strings.TrimPrefix(spec.Binary, "/")]
		if !ok {
			return nil, fmt.Errorf("%s %s: no %s in the binary layer", spec.Name, d.Platform, spec.Binary)
		}
		info, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			return nil, fmt.Errorf("%s %s: Go build information of %s: %w", spec.Name, d.Platform, spec.Binary, err)
		}
		plat := d.Platform.String()
		imgRef := "image:" + plat
		binRef := "binary:" + plat
		rootDeps = append(rootDeps, imgRef)
		b.Components = append(b.Components, component{
			Type: "container", BOMRef: imgRef, Name: spec.Name, Version: version,
			PURL:       ociPURL(spec.Name, d.Digest, d.Platform),
			Hashes:     []hash{{Alg: "SHA-256", Content: d.Digest.Hex}},
			Properties: []property{{Name: "oci:platform", Value: plat}},
		})
		sum := sha256.Sum256(bin)
		props := []property{{Name: "go:version", Value: info.GoVersion}, {Name: "go:main", Value: info.Path}}
		for _, s := range info.Settings {
			props = append(props, property{Name: "go:build:" + s.Key, Value: s.Value})
		}
		b.Components = append(b.Components, component{
			Type: "application", BOMRef: binRef, Name: spec.Binary, Version: version,
			PURL:       "pkg:golang/" + info.Main.Path + "@" + version + "?" + url.Values{"goos": {d.Platform.OS}, "goarch": {d.Platform.Architecture}}.Encode(),
			Hashes:     []hash{{Alg: "SHA-256", Content: hex.EncodeToString(sum[:])}},
			Properties: props,
		})
		binDeps := []string{"go:stdlib@" + info.GoVersion}
		modules[binDeps[0]] = component{
			Type: "library", BOMRef: binDeps[0], Name: "stdlib", Version: info.GoVersion,
			PURL: "pkg:golang/stdlib@" + strings.TrimPrefix(info.GoVersion, "go"),
		}
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			ref := "go:" + m.Path + "@" + m.Version
			binDeps = append(binDeps, ref)
			c := component{Type: "library", BOMRef: ref, Name: m.Path, Version: m.Version, PURL: "pkg:golang/" + m.Path + "@" + m.Version}
			if m.Sum != "" {
				c.Properties = []property{{Name: "go:sum", Value: m.Sum}}
			}
			modules[ref] = c
		}
		var imgDeps []string
		for _, name := range sortedKeys(base) {
			data := base[name]
			ref := "file:/" + name
			s := sha256.Sum256(data)
			files[ref] = component{Type: "file", BOMRef: ref, Name: "/" + name, Hashes: []hash{{Alg: "SHA-256", Content: hex.EncodeToString(s[:])}}}
			imgDeps = append(imgDeps, ref)
		}
		imgDeps = append(imgDeps, binRef)
		b.Dependencies = append(b.Dependencies,
			dependency{Ref: imgRef, DependsOn: imgDeps},
			dependency{Ref: binRef, DependsOn: binDeps})
	}
	for _, ref := range sortedKeys(files) {
		b.Components = append(b.Components, files[ref])
	}
	for _, ref := range sortedKeys(modules) {
		b.Components = append(b.Components, modules[ref])
		b.Dependencies = append(b.Dependencies, dependency{Ref: ref, DependsOn: []string{}})
	}
	for _, ref := range sortedKeys(files) {
		b.Dependencies = append(b.Dependencies, dependency{Ref: ref, DependsOn: []string{}})
	}
	b.Dependencies = append([]dependency{{Ref: "image", DependsOn: rootDeps}}, b.Dependencies...)
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// layerFiles is the regular files of a layer by path (no leading slash).
func layerFiles(l v1.Layer) (map[string][]byte, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(h.Name, "./")] = data
	}
}

// ociPURL is the package URL of an OCI artifact by digest
// (github.com/package-url/purl-spec, type oci).
func ociPURL(name string, d v1.Hash, p *v1.Platform) string {
	q := url.Values{}
	if p != nil {
		q.Set("arch", p.Architecture)
		q.Set("os", p.OS)
		if p.Variant != "" {
			q.Set("variant", p.Variant)
		}
	}
	s := "pkg:oci/" + name + "@" + url.PathEscape(d.String())
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// serial is a urn:uuid derived from the image digest (version 8: custom),
// so that an SBOM is reproducible and names its image.
func serial(d v1.Hash) string {
	s := sha256.Sum256([]byte(d.String()))
	s[6] = (s[6] & 0x0f) | 0x80
	s[8] = (s[8] & 0x3f) | 0x80
	h := hex.EncodeToString(s[:16])
	return "urn:uuid:" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
