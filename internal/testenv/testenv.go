// Package testenv states once what a test does when this machine lacks
// something it needs (root, a tool, a built binary, a shipped setting):
// on a developer's machine it skips, saying what is missing; under CI
// (CI=true, as .ci/run sets it) it fails, so that what CI exists to check
// is never skipped silently.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// UnderCI reports whether the tests run under CI.
func UnderCI() bool { return os.Getenv("CI") != "" }

// Missing skips t (outside CI) or fails it (under CI) because of what is
// missing, formatted as by fmt.Sprintf.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if !UnderCI() {
		t.Skipf("%s (CI=true makes this a failure)", why)
	}
	t.Fatalf("required under CI: %s", why)
}

// Root requires root, for why.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root: %s", why)
	}
}

// Tools requires each tool on PATH and returns their paths, in order.
func Tools(t testing.TB, tools ...string) []string {
	t.Helper()
	paths := make([]string, len(tools))
	for i, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			Missing(t, "needs %s on PATH (hack/host-deps.sh installs the test tools)", tool)
		}
		paths[i] = p
	}
	return paths
}

// WithoutRace skips t in a test binary built with -race: a load test whose
// cost the race runtime multiplies while the races it could find are the
// concern of smaller tests that run under it. `make test` runs such a test
// in a race-free go test of its own (hack/test.sh's NORACE_TESTS, which
// TestWithoutRaceTestsRunInMakeTest holds to every caller); why says what
// the race runtime costs it.
func WithoutRace(t testing.TB, why string) {
	t.Helper()
	if RaceDetector {
		t.Skipf("runs without -race (make test's NORACE_TESTS): %s", why)
	}
}
