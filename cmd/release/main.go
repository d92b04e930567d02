// Command release makes a release of servicegroup (internal/release,
// build/README-images.md "Releases"); `make release VERSION=vX.Y.Z` runs it.
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

	"github.com/servicegroup/servicegroup/internal/imagebuild"
	"github.com/servicegroup/servicegroup/internal/release"
	"github.com/servicegroup/servicegroup/internal/releasetools"
)

func main() {
	var (
		version   = flag.String("version", "", "the release, vX.Y.Z (build/VERSION's)")
		revision  = flag.String("revision", "", "source commit recorded in the images")
		epoch     = flag.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every timestamp (default $SOURCE_DATE_EPOCH, else 0)")
		out       = flag.String("out", "bin/release", "output directory (replaced)")
		registry  = flag.String("registry", "", "host/prefix receiving the images and the chart (empty: a registry of this run's own on 127.0.0.1; the signed images are kept under OUT/signed)")
		insecure  = flag.Bool("insecure-registry", false, "plain HTTP to --registry")
		platforms = flag.String("platforms", "linux/amd64,linux/arm64,linux/arm/v7", "the images' platforms")
		krew      = flag.String("plugin-platforms", strings.Join(release.DefaultKrewPlatforms, ","), "kubectl-grid archives' platforms (os/arch)")
		download  = flag.String("download-url", "", "where the archives are published (default https://github.com/servicegroup/servicegroup/releases/download/VERSION)")
		key       = flag.String("key", os.Getenv("COSIGN_KEY"), "cosign private key (default $COSIGN_KEY); its password in $COSIGN_PASSWORD")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *version, *revision, *epoch, *out, *registry, *insecure, *platforms, *krew, *download, *key); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, version, revision, epoch, out, registry string, insecure bool, platforms, krew, download, key string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	plats, err := imagebuild.ParsePlatforms(platforms)
	if err != nil {
		return err
	}
	var date time.Time
	if epoch != "" {
		s, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("source date epoch %q: %w", epoch, err)
		}
		date = time.Unix(s, 0).UTC()
	} else {
		date = time.Unix(0, 0).UTC()
	}
	helm, err := releasetools.Built("helm")
	if err != nil {
		return err
	}
	cosign, err := releasetools.Built("cosign")
	if err != nil {
		return err
	}
	if download == "" {
		download = "https://github.com/servicegroup/servicegroup/releases/download/" + version
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	res, err := release.Make(ctx, release.Options{
		Root: root, Version: version, Revision: revision, SourceDate: date, Out: out,
		Registry: registry, Insecure: insecure, Platforms: plats, KrewPlatforms: strings.Split(krew, ","),
		DownloadURL: download, Key: key, Helm: helm, Cosign: cosign,
		Log: func(format string, args ...any) { fmt.Printf(format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	fmt.Printf("release %s in %s (registry %s):\n", version, out, res.Registry)
	for _, s := range imagebuild.Images {
		fmt.Printf("  %s/%s@%s\n", res.Registry, s.Name, res.Images[s.Name])
	}
	fmt.Printf("  chart %s\n", res.Chart)
	return nil
}
