package imagebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// defaultManifests is the kustomization the operator guide installs.
var defaultManifests = filepath.Join(buildDir, "manifests", "default")

// TestOverlayPinsPushedImages pushes the three images to a registry on
// 127.0.0.1, writes the overlay as `make images REGISTRY=...` does, renders
// it with the real kubectl and checks every container and init container of
// every rendered object: ours run REGISTRY/NAME@<the digest pushed>, which
// the registry serves; every other container is left as the base has it.
func TestOverlayPinsPushedImages(t *testing.T) {
	kubectl := controlplane.BinaryForTest(t, controlplane.Kubectl)
	dir, digests := buildAll(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://") + "/edge"

	var pins []Pin
	for _, spec := range Images {
		idx, err := ReadLayout(filepath.Join(dir, spec.Name), testVersion)
		if err != nil {
			t.Fatal(err)
		}
		if err := Push(t.Context(), reg+"/"+spec.Name+":"+testVersion, idx, true); err != nil {
			t.Fatal(err)
		}
		pins = append(pins, PushedPin(spec.Name, reg, digests[spec.Name]))
	}
	out := t.TempDir()
	if _, err := WriteOverlay(out, defaultManifests, pins); err != nil {
		t.Fatal(err)
	}

	base := renderImages(t, kubectl, defaultManifests)
	got := renderImages(t, kubectl, out)
	checkPinned(t, base, got, func(image string) (v1.Hash, bool) {
		rest, ok := strings.CutPrefix(image, reg+"/")
		if !ok {
			return v1.Hash{}, false
		}
		img, digest, ok := strings.Cut(rest, "@")
		if !ok {
			return v1.Hash{}, false
		}
		h, err := v1.NewHash(digest)
		if err != nil {
			return v1.Hash{}, false
		}
		// The registry must serve it: the overlay names nothing unpushed.
		ref, err := name.ParseReference(image, name.Insecure)
		if err != nil {
			t.Errorf("%s: %v", image, err)
			return v1.Hash{}, false
		}
		idx, err := remote.Index(ref, remote.WithContext(t.Context()))
		if err != nil {
			t.Errorf("%s is not in the registry: %v", image, err)
			return v1.Hash{}, false
		}
		if d, _ := idx.Digest(); d != h {
			t.Errorf("%s: registry serves %s", image, d)
		}
		return h, digests[img] == h
	})
}

// TestOverlayLocalLayouts: without a registry the overlay runs the layouts'
// own names (servicegroup/NAME:VERSION), and each layout carries that name as
// the kubelet asks the runtime for it once imported.
func TestOverlayLocalLayouts(t *testing.T) {
	kubectl := controlplane.BinaryForTest(t, controlplane.Kubectl)
	dir, digests := buildAll(t)
	var pins []Pin
	for _, spec := range Images {
		pins = append(pins, LocalPin(spec.Name, ManifestRepository, testVersion))
		index, err := os.ReadFile(filepath.Join(dir, spec.Name, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m v1.IndexManifest
		if err := json.Unmarshal(index, &m); err != nil {
			t.Fatal(err)
		}
		want := "docker.io/" + ManifestRepository + "/" + spec.Name + ":" + testVersion
		if len(m.Manifests) != 1 || m.Manifests[0].Annotations["io.containerd.image.name"] != want || m.Manifests[0].Digest != digests[spec.Name] {
			t.Errorf("%s/index.json: %+v, want one index %s named %s", spec.Name, m.Manifests, digests[spec.Name], want)
		}
	}
	out := t.TempDir()
	if _, err := WriteOverlay(out, defaultManifests, pins); err != nil {
		t.Fatal(err)
	}
	base := renderImages(t, kubectl, defaultManifests)
	got := renderImages(t, kubectl, out)
	fake := v1.Hash{Algorithm: "local", Hex: testVersion}
	checkPinned(t, base, got, func(image string) (v1.Hash, bool) {
		repo, tag, _ := strings.Cut(image, ":")
		n, ok := strings.CutPrefix(repo, ManifestRepository+"/")
		_, known := Lookup(n)
		return fake, ok && known && tag == testVersion
	})
}

// checkPinned compares the containers of the rendered base with those of the
// rendered overlay: each that runs one of our images in the base must run,
// in the overlay, an image pinned accepts; every other must be unchanged.
func checkPinned(t *testing.T, base, got map[string]string, pinned func(image string) (v1.Hash, bool)) {
	t.Helper()
	ours := 0
	for key, image := range base {
		after, ok := got[key]
		if !ok {
			t.Errorf("%s: in the base, not in the overlay", key)
			continue
		}
		if !strings.HasPrefix(image, ManifestRepository+"/") {
			if after != image {
				t.Errorf("%s: not ours (%s), but the overlay changed it to %s", key, image, after)
			}
			continue
		}
		ours++
		if _, ok := pinned(after); !ok {
			t.Errorf("%s: runs %s in the overlay, not what was built (base: %s)", key, after, image)
		}
	}
	for key := range got {
		if _, ok := base[key]; !ok {
			t.Errorf("%s: in the overlay, not in the base", key)
		}
	}
	// controller; wrapper and its init container; CoreDNS and its init container.
	if ours < 5 {
		t.Errorf("only %d containers of ours rendered: %v", ours, base)
	}
}

// renderImages runs `kubectl kustomize dir` and returns every container's
// and init container's image, keyed by kind/namespace/name/container.
func renderImages(t *testing.T, kubectl, dir string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	images := map[string]string{}
	for i, doc := range bytes.Split(out, []byte("\n---\n")) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Spec any `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("kubectl kustomize %s, document %d: %v", dir, i, err)
		}
		if obj.Kind == "CustomResourceDefinition" {
			continue // the schema's "containers" are property definitions
		}
		collectContainers(obj.Spec, func(c map[string]any) {
			key := obj.Kind + "/" + obj.Metadata.Namespace + "/" + obj.Metadata.Name + "/" + c["name"].(string)
			images[key], _ = c["image"].(string)
		})
	}
	if len(images) == 0 {
		t.Fatalf("kubectl kustomize %s rendered no containers:\n%s", dir, out)
	}
	return images
}
