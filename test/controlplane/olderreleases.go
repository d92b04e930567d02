package controlplane

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/servicegroup/servicegroup/internal/buildcache"
	"github.com/servicegroup/servicegroup/internal/testbin"
)

// OlderRelease is one older Kubernetes release of a binary and its path.
type OlderRelease struct {
	Version, Binary string
}

// OlderReleases returns binary (kube-apiserver, kube-proxy) for each release
// listed in hack/<stem>-versions.txt, built by hack/<stem>-bins.sh into
// $SERVICEGROUP_CACHE/<binary>-<release>-<go version>/bin. When one is
// missing and either a build is wanted (CI) or one is under way (the
// older releases' lock is held: .ci/run and `make test` start
// hack/older-release-bins.sh in the background), it runs the script, which
// waits for that build or does it, within ctx; otherwise the error names
// what is missing and how to build it.
func OlderReleases(ctx context.Context, stem, binary string) ([]OlderRelease, error) {
	root, err := testbin.RepoRoot()
	if err != nil {
		return nil, err
	}
	versions, err := readVersions(filepath.Join(root, "hack", stem+"-versions.txt"))
	if err != nil {
		return nil, err
	}
	path := func(v string) string {
		return filepath.Join(CacheRoot(), binary+"-"+v+"-"+runtime.Version(), "bin", binary)
	}
	var missing []string
	for _, v := range versions {
		if _, err := os.Stat(path(v)); err != nil {
			missing = append(missing, v)
		}
	}
	script := filepath.Join("hack", stem+"-bins.sh")
	if len(missing) > 0 && (os.Getenv("CI") != "" || buildcache.UnderWay("older-release-bins.lock")) {
		cmd := exec.CommandContext(ctx, filepath.Join(root, script), missing...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s %s: %w\n%s", script, strings.Join(missing, " "), err, out)
		}
	}
	var out []OlderRelease
	for _, v := range versions {
		if _, err := os.Stat(path(v)); err != nil {
			return nil, fmt.Errorf("%s %s not found in %s: run 'make %s-bins' (%s)", binary, v, filepath.Dir(path(v)), stem, script)
		}
		out = append(out, OlderRelease{Version: v, Binary: path(v)})
	}
	return out, nil
}

// readVersions reads one release a line, # comments and blank lines skipped.
func readVersions(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}
