package imagebuild

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// binaryMode is the mode of the entrypoint in the image.
const binaryMode fs.FileMode = 0o755

// Spec describes one image: a main package whose binary is the entrypoint.
type Spec struct {
	Name        string   // repository name, e.g. application-grid-controller
	Package     string   // main package, e.g. ./cmd/application-grid-controller
	Binary      string   // path of the binary in the image, e.g. /coredns
	Ports       []string // exposed ports, e.g. 53/udp
	Description string
}

// Options are what every image of one build shares.
type Options struct {
	Version    string    // image version, also stamped into the binaries by the caller's LDFlags
	Revision   string    // source revision (git commit), recorded as a label; may be empty
	SourceDate time.Time // every timestamp in the images
	Platforms  []v1.Platform
	Go         GoBuild
	// WorkDir holds intermediate binaries; a temporary directory when empty.
	WorkDir string
}

// Build compiles spec's binary for every platform and returns the
// multi-arch index of the images.
func Build(ctx context.Context, spec Spec, o Options) (v1.ImageIndex, error) {
	if len(o.Platforms) == 0 {
		return nil, fmt.Errorf("image %s: no platforms", spec.Name)
	}
	work := o.WorkDir
	if work == "" {
		dir, err := os.MkdirTemp("", "imagebuild-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		work = dir
	}
	base, err := BaseLayer(o.SourceDate)
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		bin, err := o.Go.Build(ctx, spec.Package, p, work)
		if err != nil {
			return nil, err
		}
		img, err := platformImage(spec, o, p, base, bin)
		if err != nil {
			return nil, fmt.Errorf("image %s for %s: %w", spec.Name, p.String(), err)
		}
		plat := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &plat},
		})
	}
	return mutate.Annotations(idx, annotations(spec, o)).(v1.ImageIndex), nil
}

// platformImage is the image of one platform: the base layer, then the binary.
func platformImage(spec Spec, o Options, p v1.Platform, base v1.Layer, bin []byte) (v1.Image, error) {
	binLayer, err := NewLayer([]File{{Path: spec.Binary, Mode: binaryMode, Data: bin}}, o.SourceDate)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.SourceDate}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "imagebuild: /etc/passwd, /etc/group, /etc/nsswitch.conf, /tmp, /home/nonroot"}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "imagebuild: go build " + spec.Package + " -> " + spec.Binary}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = created
	cf.Author = ""
	cf.Config = v1.Config{
		Entrypoint: []string{spec.Binary},
		User:       User,
		WorkingDir: "/",
		Env:        []string{"PATH=" + path.Dir(spec.Binary)},
		Labels:     annotations(spec, o),
	}
	if len(spec.Ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, port := range spec.Ports {
			cf.Config.ExposedPorts[port] = struct{}{}
		}
	}
	return mutate.ConfigFile(img, cf)
}

// annotations are the OCI annotations of the index and the labels of each image.
func annotations(spec Spec, o Options) map[string]string {
	a := map[string]string{
		"org.opencontainers.image.title":   spec.Name,
		"org.opencontainers.image.version": o.Version,
		"org.opencontainers.image.created": o.SourceDate.UTC().Format(time.RFC3339),
	}
	if spec.Description != "" {
		a["org.opencontainers.image.description"] = spec.Description
	}
	if o.Revision != "" {
		a["org.opencontainers.image.revision"] = o.Revision
	}
	return a
}
