package imagebuild

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// WriteLayout replaces dir with an OCI image layout holding idx, tagged tag
// (the org.opencontainers.image.ref.name annotation tools such as skopeo
// read: oci:DIR:TAG) and named ref for containerd, normalised as the kubelet
// asks for it (ContainerdName), so `ctr images import` makes it usable.
func WriteLayout(dir, ref, tag string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          ContainerdName(ref),
	}))
}

// ReadLayout returns the index tagged tag in the OCI layout at dir.
func ReadLayout(dir, tag string) (v1.ImageIndex, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == tag {
			return root.ImageIndex(d.Digest)
		}
	}
	return nil, fmt.Errorf("%s: no index tagged %q", dir, tag)
}

// Push writes idx to ref (REGISTRY/NAME:TAG) with the credentials of the
// Docker config (~/.docker/config.json) or anonymously; insecure allows a
// plain-HTTP registry.
func Push(ctx context.Context, ref string, idx v1.ImageIndex, insecure bool) error {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return err
	}
	return remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
}
