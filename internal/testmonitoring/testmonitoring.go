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

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// Dir is the script's cache directory (it names it: one rule for both).
func Dir(t testing.TB) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "monitoring-tools.sh"), "--print-dir").Output()
	if err != nil {
		t.Fatalf("hack/monitoring-tools.sh --print-dir: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, "promtool")); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("promtool and the prometheus-operator CRDs are not built (%v): run 'make monitoring-tools'; CI=true makes this a failure", err)
		}
		t.Fatalf("promtool required under CI: %v", err)
	}
	return dir
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
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "grafana-dashboard-check.sh"), "--print-path").Output()
	if err != nil {
		t.Fatalf("hack/grafana-dashboard-check.sh --print-path: %v", err)
	}
	bin := strings.TrimSpace(string(out))
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("grafana-dashboard-check is not built (%v): run 'make monitoring-tools'; CI=true makes this a failure", err)
		}
		t.Fatalf("grafana-dashboard-check required under CI: %v", err)
	}
	return bin
}
