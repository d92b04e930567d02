package imagebuild

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// buildDir is the repository's build/ directory, seen from this package.
var buildDir = filepath.Join("..", "..", "build")

// releaseVersion is build/VERSION: the tag the shipped manifests run.
func releaseVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(buildDir, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(data))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(v) {
		t.Fatalf("build/VERSION %q is not a release version vMAJOR.MINOR.PATCH", v)
	}
	return v
}

// container is one container or init container of a manifest's pod spec.
type container struct {
	file, name string
	image      string
	pullPolicy string
}

// manifestContainers returns every container and init container of every
// object in the YAML files under build/manifests.
func manifestContainers(t *testing.T) []container {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(buildDir, "manifests", "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests found: %v", err)
	}
	patches := kustomizePatches(t, files)
	var out []container
	for _, f := range files {
		if patches[f] {
			continue // a patch adds to containers checked where they are defined
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---")) {
			var obj any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			collectContainers(obj, func(c map[string]any) {
				image, _ := c["image"].(string)
				policy, _ := c["imagePullPolicy"].(string)
				name, _ := c["name"].(string)
				out = append(out, container{file: f, name: name, image: image, pullPolicy: policy})
			})
		}
	}
	return out
}

// kustomizePatches are the files that kustomizations among files name as
// patches.
func kustomizePatches(t *testing.T, files []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Patches []struct {
				Path string `json:"path"`
			} `json:"patches"`
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range k.Patches {
			if p.Path != "" {
				out[filepath.Join(filepath.Dir(f), p.Path)] = true
			}
		}
	}
	return out
}

// collectContainers calls fn for each entry of any "containers" or
// "initContainers" list below v.
func collectContainers(v any, fn func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if list, ok := child.([]any); ok && (k == "containers" || k == "initContainers") {
				for _, c := range list {
					if m, ok := c.(map[string]any); ok {
						fn(m)
					}
				}
				continue
			}
			collectContainers(child, fn)
		}
	case []any:
		for _, child := range v {
			collectContainers(child, fn)
		}
	}
}

// TestManifestsReferenceTheseImages: every servicegroup image a manifest in
// build/manifests runs is one this builder makes, at the release in
// build/VERSION, and each built image is deployed by some manifest, so a
// rename or a forgotten tag on either side fails here.
func TestManifestsReferenceTheseImages(t *testing.T) {
	version := releaseVersion(t)
	used := map[string]bool{}
	for _, c := range manifestContainers(t) {
		repo, tag, _ := strings.Cut(c.image, ":")
		name, ok := strings.CutPrefix(repo, ManifestRepository+"/")
		if !ok {
			continue // kube-proxy and other upstream images
		}
		if _, ok := Lookup(name); !ok {
			t.Errorf("%s: %s runs %s, which image-build does not build", c.file, c.name, c.image)
		}
		if tag != version {
			t.Errorf("%s: %s runs %s, want tag %s (build/VERSION)", c.file, c.name, c.image, version)
		}
		used[name] = true
	}
	for _, s := range Images {
		if !used[s.Name] {
			t.Errorf("image %s is built but no manifest in build/manifests runs %s/%s", s.Name, ManifestRepository, s.Name)
		}
	}
}

// TestManifestsPinImages: every container names a fixed image (a tag other
// than latest, or a digest) and pulls it only when the node lacks it, so an
// edge node that lost its registry still restarts what it already has.
func TestManifestsPinImages(t *testing.T) {
	cs := manifestContainers(t)
	if len(cs) == 0 {
		t.Fatal("no containers found in build/manifests")
	}
	for _, c := range cs {
		if msg := floating(c.image); msg != "" {
			t.Errorf("%s: container %s: image %q %s", c.file, c.name, c.image, msg)
		}
		if c.pullPolicy != "IfNotPresent" {
			t.Errorf("%s: container %s: imagePullPolicy %q, want IfNotPresent", c.file, c.name, c.pullPolicy)
		}
	}
}

// floating says why ref does not name one fixed image ("" when it does).
func floating(ref string) string {
	if _, digest, ok := strings.Cut(ref, "@"); ok {
		if !strings.HasPrefix(digest, "sha256:") {
			return "has a digest that is not sha256"
		}
		return ""
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	switch {
	case ref == "":
		return "is empty"
	case !ok || tag == "":
		return "has no tag"
	case tag == "latest":
		return "is :latest"
	}
	return ""
}

// TestBuildDirNamesNoFloatingImage: nothing under build/ (manifests,
// Dockerfiles, docs) tells anyone to run :latest or an untagged image. The
// generated CRDs are skipped: their schema quotes the Kubernetes API's own
// field descriptions ("Defaults to Always if :latest tag is specified").
func TestBuildDirNamesNoFloatingImage(t *testing.T) {
	imageLine := regexp.MustCompile(`(?m)^[\s-]*image:\s*"?([^"\s#]+)`)
	fromLine := regexp.MustCompile(`(?m)^FROM\s+(\S+)`)
	latest := regexp.MustCompile(`:latest\b`)
	// Any of our image names followed by a tag or digest, or not.
	ours := regexp.MustCompile(ManifestRepository + `/(application-grid-controller|application-grid-wrapper|coredns-gridhosts)([:@][\w.$(){}<>-]+)?`)
	var checked int
	err := filepath.WalkDir(buildDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The CRDs' schemas (and the chart's copies of them) name no image.
		if d.IsDir() && (path == filepath.Join(buildDir, "crds") || path == filepath.Join(buildDir, "chart", "crds")) {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(data)
		checked++
		for _, m := range latest.FindAllStringIndex(text, -1) {
			t.Errorf("%s: %q names :latest", path, line(text, m[0]))
		}
		for _, m := range imageLine.FindAllStringSubmatch(text, -1) {
			// A Helm template's image is its values' (build/chart): the
			// chart's default render is kustomize's (internal/chartgen's
			// TestDefaultRenderIsKustomize), whose images this checks, and
			// values.schema.json refuses the tag latest.
			if strings.HasPrefix(m[1], "{{") {
				continue
			}
			if msg := floating(m[1]); msg != "" && !strings.Contains(m[1], "$") {
				t.Errorf("%s: image %q %s", path, m[1], msg)
			}
		}
		if strings.HasSuffix(path, "Dockerfile") {
			for _, m := range fromLine.FindAllStringSubmatch(text, -1) {
				if msg := floating(m[1]); msg != "" {
					t.Errorf("%s: FROM %q %s", path, m[1], msg)
				}
			}
		}
		for _, m := range ours.FindAllStringSubmatchIndex(text, -1) {
			// A kustomization's images[].name matches every tag of a name.
			if m[4] < 0 && !strings.HasSuffix(text[:m[0]], "name: ") {
				t.Errorf("%s: %q names one of our images without a tag or digest", path, line(text, m[0]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no files under build/")
	}
}

// line returns the line of text around offset i.
func line(text string, i int) string {
	start := strings.LastIndex(text[:i], "\n") + 1
	end := strings.Index(text[i:], "\n")
	if end < 0 {
		return text[start:]
	}
	return text[start : i+end]
}

func TestFloating(t *testing.T) {
	for ref, want := range map[string]bool{
		"servicegroup/a:v0.1.0":         false,
		"registry.k8s.io/kube-proxy:v1": false,
		"127.0.0.1:5000/a@sha256:00":    false,
		"servicegroup/a":                true,
		"127.0.0.1:5000/a":              true,
		"servicegroup/a:latest":         true,
		"a@md5:00":                      true,
		"":                              true,
	} {
		if got := floating(ref) != ""; got != want {
			t.Errorf("floating(%q) = %q, want floating %v", ref, floating(ref), want)
		}
	}
}
