package imagebuild

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"
)

// OverlayFile is the kustomization image-build writes next to the layouts.
const OverlayFile = "kustomization.yaml"

// Pin is one entry of a kustomization's `images:`: every container whose
// image is ManifestRepository/Name (any tag) is set to NewName with Digest,
// or to NewName:NewTag when Digest is empty.
type Pin struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// PushedPin points the manifests' image name at what was pushed to
// registry (host/prefix), by the index's digest, so every node runs exactly
// these bytes whatever happens to the tag later.
func PushedPin(name, registry string, digest v1.Hash) Pin {
	return Pin{
		Name:    ManifestRepository + "/" + name,
		NewName: strings.TrimSuffix(registry, "/") + "/" + name,
		Digest:  digest.String(),
	}
}

// LocalPin points the manifests' image name at the layout's own name
// (repository/name:version), for a runtime that imported the layouts.
func LocalPin(name, repository, version string) Pin {
	p := Pin{Name: ManifestRepository + "/" + name, NewTag: version}
	if repository != ManifestRepository {
		p.NewName = repository + "/" + name
	}
	return p
}

// WriteOverlay writes dir/kustomization.yaml: base (a kustomization
// directory, referred to by its path relative to dir, as kustomize requires)
// with every image in pins replaced. It returns the file's path.
func WriteOverlay(dir, base string, pins []Pin) (string, error) {
	if len(pins) == 0 {
		return "", fmt.Errorf("overlay for %s: no images", base)
	}
	if _, err := os.Stat(filepath.Join(base, OverlayFile)); err != nil {
		return "", fmt.Errorf("overlay base %s is not a kustomization: %w", base, err)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	absBase, err := filepath.Abs(base)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absDir, absBase)
	if err != nil {
		return "", err
	}
	// Marshalled apart: yaml sorts a struct's keys, and a reader expects
	// apiVersion and kind first.
	images, err := yaml.Marshal(struct {
		Images []Pin `json:"images"`
	}{pins})
	if err != nil {
		return "", err
	}
	resources, err := yaml.Marshal([]string{filepath.ToSlash(rel)})
	if err != nil {
		return "", err
	}
	text := "# Written by cmd/image-build (make images): the kustomization below with\n" +
		"# our images set to what this build made. Apply with:\n" +
		"#   kubectl apply --server-side -k " + filepath.ToSlash(dir) + "\n" +
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n" +
		string(resources) + string(images)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, OverlayFile)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", err
	}
	return path, nil
}
