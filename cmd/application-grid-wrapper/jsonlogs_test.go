package main

import (
	"slices"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestMain lets TestJSONLogs run this test binary as the command itself:
// klog's output settings are process-wide.
func TestMain(m *testing.M) { testbin.SelfMain(m, "RUN_APPLICATION_GRID_WRAPPER", main) }

// TestJSONLogs runs the command with --logging-format json against a real
// apiserver until it is ready and exits on SIGTERM: every line it wrote,
// client-go's included, is one JSON object, among them its "Serving" line.
func TestJSONLogs(t *testing.T) {
	cp := startWithNode0(t)
	addr, metricsAddr := controlplane.FreeAddress(t), controlplane.FreeAddress(t)
	cmd := testbin.StartSelf(t, "RUN_APPLICATION_GRID_WRAPPER", "--kubeconfig", cp.Kubeconfig, "--node-name", "node0", "--bind-address", addr,
		"--insecure-plain-http", "--metrics-bind-address", metricsAddr, "--state-dir", t.TempDir(), "-v", "4", "--logging-format", "json")

	testwait.Eventually(t.Context(), t, testwait.Floor, "wrapper ready", testwait.HTTPOK("http://"+metricsAddr+"/readyz"))
	cmd.Stop(t)
	log := cmd.Log(t)
	if !slices.Contains(testbin.JSONLogMessages(t, log), "Serving") {
		t.Errorf("no JSON line with msg \"Serving\" in:\n%s", log)
	}
}
