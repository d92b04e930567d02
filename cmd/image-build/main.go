// Command image-build builds the project's container images without a
// container engine (see build/README-images.md): one multi-arch OCI index per
// image, written as an OCI layout under --out and pushed when --registry is
// set, plus --out/kustomization.yaml: --overlay-base with every one of our
// images set to what was just built (pushed: by digest). `make images` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/servicegroup/servicegroup/internal/imagebuild"
)

func main() {
	var (
		names     = flag.String("images", "", "comma-separated image names (empty: all of "+allNames()+")")
		platforms = flag.String("platforms", "linux/amd64,linux/arm64,linux/arm/v7", "comma-separated platforms")
		out       = flag.String("out", "bin/images", "directory receiving one OCI layout per image")
		version   = flag.String("version", "dev", "image tag, also stamped into the binaries")
		revision  = flag.String("revision", "", "source revision recorded in the images' labels")
		epoch     = flag.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every timestamp in the images (default $SOURCE_DATE_EPOCH, else 0)")
		prefix    = flag.String("repository", "servicegroup", "repository prefix of the images' names in the layout")
		registry  = flag.String("registry", "", "push each index to REGISTRY/NAME:VERSION (empty: no push)")
		insecure  = flag.Bool("insecure-registry", false, "push over plain HTTP")
		base      = flag.String("overlay-base", "build/manifests/default", "kustomization the overlay OUT/"+imagebuild.OverlayFile+" sets the images of (empty: no overlay)")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *names, *platforms, *out, *version, *revision, *epoch, *prefix, *registry, *insecure, *base); err != nil {
		fmt.Fprintln(os.Stderr, "image-build:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, names, platforms, out, version, revision, epoch, prefix, registry string, insecure bool, base string) error {
	specs, err := selectImages(names)
	if err != nil {
		return err
	}
	plats, err := imagebuild.ParsePlatforms(platforms)
	if err != nil {
		return err
	}
	date, err := sourceDate(epoch)
	if err != nil {
		return err
	}
	o := imagebuild.Options{
		Version: version, Revision: revision, SourceDate: date, Platforms: plats,
		Go: imagebuild.GoBuild{LDFlags: imagebuild.VersionLDFlags(version)},
	}
	var pins []imagebuild.Pin
	for _, spec := range specs {
		start := time.Now()
		idx, err := imagebuild.Build(ctx, spec, o)
		if err != nil {
			return err
		}
		dir := filepath.Join(out, spec.Name)
		ref := prefix + "/" + spec.Name + ":" + version
		if err := imagebuild.WriteLayout(dir, ref, version, idx); err != nil {
			return fmt.Errorf("writing %s: %w", dir, err)
		}
		digest, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s %s@%s (%s) -> %s in %s\n", ref, spec.Name, digest, sizes(idx), dir, time.Since(start).Round(time.Second))
		if registry != "" {
			dst := strings.TrimSuffix(registry, "/") + "/" + spec.Name + ":" + version
			if err := imagebuild.Push(ctx, dst, idx, insecure); err != nil {
				return fmt.Errorf("pushing %s: %w", dst, err)
			}
			fmt.Printf("pushed %s@%s\n", dst, digest)
			pins = append(pins, imagebuild.PushedPin(spec.Name, registry, digest))
		} else {
			pins = append(pins, imagebuild.LocalPin(spec.Name, prefix, version))
		}
	}
	return writeOverlay(out, base, pins)
}

// writeOverlay writes the kustomization that deploys base with this build's
// images. Only a build of every image writes it: a partial one would leave
// some containers on the shipped tag.
func writeOverlay(out, base string, pins []imagebuild.Pin) error {
	if base == "" {
		return nil
	}
	if len(pins) != len(imagebuild.Images) {
		fmt.Printf("not writing %s: only %d of %d images built\n", filepath.Join(out, imagebuild.OverlayFile), len(pins), len(imagebuild.Images))
		return nil
	}
	path, err := imagebuild.WriteOverlay(out, base, pins)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: kubectl apply --server-side -k %s\n", path, out)
	return nil
}

func selectImages(names string) ([]imagebuild.Spec, error) {
	if names == "" {
		return imagebuild.Images, nil
	}
	var out []imagebuild.Spec
	for _, n := range strings.Split(names, ",") {
		s, ok := imagebuild.Lookup(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("unknown image %q (known: %s)", n, allNames())
		}
		out = append(out, s)
	}
	return out, nil
}

func allNames() string {
	var n []string
	for _, s := range imagebuild.Images {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}

// sourceDate is the images' one timestamp: SOURCE_DATE_EPOCH, as
// reproducible-builds.org defines it (the Makefile passes the commit time).
func sourceDate(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("source date epoch %q: %w", epoch, err)
	}
	return time.Unix(s, 0).UTC(), nil
}

// sizes lists each platform's compressed layers' size, e.g. "linux/amd64 21.3MB".
func sizes(idx v1.ImageIndex) string {
	m, err := idx.IndexManifest()
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err.Error()
		}
		layers, err := img.Layers()
		if err != nil {
			return err.Error()
		}
		var total int64
		for _, l := range layers {
			n, err := l.Size()
			if err != nil {
				return err.Error()
			}
			total += n
		}
		parts = append(parts, fmt.Sprintf("%s %.1fMB", d.Platform.String(), float64(total)/1e6))
	}
	return strings.Join(parts, ", ")
}
