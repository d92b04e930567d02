// Package releasetools finds the release tools hack/release-tools.sh builds
// from the Go module proxy (helm, cosign, krew; hack/release-versions.env):
// for the release command, the chart's tests and the real-node test.
package releasetools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// Tools are the tools the script builds.
var Tools = []string{"helm", "cosign", "krew"}

// Path is the path of tool in the script's cache (it names the directory:
// one rule for both), whether built or not.
func Path(tool string) (string, error) {
	root, err := testbin.RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(root, "hack", "release-tools.sh"), "--print-dir", tool).Output()
	if err != nil {
		return "", fmt.Errorf("hack/release-tools.sh --print-dir %s: %w", tool, err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), tool), nil
}

// Built is the path of tool, or an error that says how to build it.
func Built(tool string) (string, error) {
	p, err := Path(tool)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not built (%v): run 'make release-tools' (hack/release-tools.sh)", tool, err)
	}
	return p, nil
}

// Require is the path of tool for a test. Not built: skipped, unless CI
// is set, where the test runs the script for it, which waits for the build
// .ci/run started in the background (its lock) or builds it, so that only
// the tests that need a tool wait for it.
func Require(t testing.TB, tool string) string {
	t.Helper()
	p, err := Built(tool)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "" {
		t.Skipf("%v; CI=true makes this build it", err)
	}
	root, rerr := testbin.RepoRoot()
	if rerr != nil {
		t.Fatal(rerr)
	}
	if out, err := exec.Command(filepath.Join(root, "hack", "release-tools.sh"), tool).CombinedOutput(); err != nil {
		t.Fatalf("hack/release-tools.sh %s: %v\n%s", tool, err, out)
	}
	if p, err = Built(tool); err != nil {
		t.Fatal(err)
	}
	return p
}
