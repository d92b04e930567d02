// Package testmonitoring finds what hack/monitoring-tools.sh built for the
// tests: promtool, Prometheus's rule tester, prometheus-operator's CRDs, and
// grafana-dashboard-check, Grafana's dashboard schema as a checker.
package testmonitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/internal/buildcache"
	"github.com/servicegroup/servicegroup/internal/testbin"
)

// lock is hack/monitoring-tools.sh's lock of promtool, the CRDs and the
// dashboard checker, in the build cache.
const lock = "monitoring-tools.lock"

// Dir is the script's cache directory (it names it: one rule for both).
func Dir(t testing.TB) string {
	t.Helper()
	return built(t, "monitoring-tools.sh", "--print-dir", "promtool", "promtool and the prometheus-operator CRDs")
}

// Promtool is the path of promtool.
func Promtool(t testing.TB) string { return filepath.Join(Dir(t), "promtool") }

// CRDs are the paths of the ServiceMonitor, PodMonitor and PrometheusRule CRDs.
func CRDs(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(Dir(t), "crds", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in %s: %v", Dir(t), err)
	}
	return paths
}

// DashboardCheck is the path of grafana-dashboard-check
// (hack/grafana-dashboard-check.sh names it).
func DashboardCheck(t testing.TB) string {
	t.Helper()
	return built(t, "grafana-dashboard-check.sh", "--print-path", "", "grafana-dashboard-check")
}

// built asks hack/script for the path it builds to (printFlag) and checks
// that path/inside exists. When it does not and either a build is wanted
// (CI) or one is under way (.ci/run and `make test` start
// hack/monitoring-tools.sh, which builds both tools under one lock, in the
// background), it runs that script, which waits for the build or does it;
// when it is still missing the test is skipped, or fails under CI; what
// names the tools in the message.
func built(t testing.TB, script, printFlag, inside, what string) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", script), printFlag).Output()
	if err != nil {
		t.Fatalf("hack/%s %s: %v", script, printFlag, err)
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(path, inside)); err != nil && (os.Getenv("CI") != "" || buildcache.UnderWay(lock)) {
		// --tools: not the Prometheus server and operator, which build
		// after these under a lock of their own.
		cmd := exec.CommandContext(t.Context(), filepath.Join(root, "hack", "monitoring-tools.sh"), "--tools")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/monitoring-tools.sh --tools: %v\n%s", err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(path, inside)); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s: not built (%v): run 'make monitoring-tools'; CI=true makes this a failure", what, err)
		}
		t.Fatalf("%s required under CI: %v", what, err)
	}
	return path
}
