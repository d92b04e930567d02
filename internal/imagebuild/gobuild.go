package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// GoBuild cross-compiles one main package into a static binary.
type GoBuild struct {
	Go      string // the go command; "go" when empty
	Dir     string // the module root
	LDFlags string // extra -ldflags, e.g. -X .../version.Version=v1
}

// Build compiles pkg for platform p into dir and returns the binary's bytes.
// CGO is off (static, no libc in the image); -trimpath and an empty build ID
// keep the binary independent of the build machine's paths. CGO_ENABLED=0 and
// -trimpath are also what make build and internal/testbin compile with, so
// the packages compiled by one are reused by the others from Go's build
// cache (-buildvcs, -buildid and -X only change the link).
func (g GoBuild) Build(ctx context.Context, pkg string, p v1.Platform, dir string) ([]byte, error) {
	env, err := goEnv(p)
	if err != nil {
		return nil, err
	}
	goCmd := g.Go
	if goCmd == "" {
		goCmd = "go"
	}
	out := filepath.Join(dir, filepath.Base(pkg)+"-"+platformSlug(p))
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= "+g.LDFlags, "-o", out, pkg)
	cmd.Dir = g.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s for %s: %w\n%s", pkg, p.String(), err, stderr.String())
	}
	return os.ReadFile(out)
}

func platformSlug(p v1.Platform) string {
	s := p.OS + "-" + p.Architecture
	if p.Variant != "" {
		s += "-" + p.Variant
	}
	return s
}
