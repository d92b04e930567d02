package imagebuild

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestManifestsReferenceTheseImages: every servicegroup image a manifest in
// build/manifests runs is one this builder makes, and each built image is
// deployed by some manifest, so a rename on either side fails here.
func TestManifestsReferenceTheseImages(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "build", "manifests", "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests found: %v", err)
	}
	imageLine := regexp.MustCompile(`(?m)^\s*image:\s*"?([^"\s]+)"?\s*$`)
	used := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range imageLine.FindAllStringSubmatch(string(data), -1) {
			repo, _, _ := strings.Cut(m[1], ":")
			name, ok := strings.CutPrefix(repo, "servicegroup/")
			if !ok {
				continue // kube-proxy and other upstream images
			}
			if _, ok := Lookup(name); !ok {
				t.Errorf("%s runs %s, which image-build does not build", f, m[1])
			}
			used[name] = true
		}
	}
	for _, s := range Images {
		if !used[s.Name] {
			t.Errorf("image %s is built but no manifest in build/manifests runs servicegroup/%s", s.Name, s.Name)
		}
	}
}
