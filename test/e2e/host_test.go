package e2e

import (
	"context"
	"os"
	"testing"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// requireHost skips (CI unset) or fails (CI=true) when this machine cannot
// build the network-namespace cluster, naming what is missing.
func requireHost(t *testing.T, tools ...harness.Tool) {
	t.Helper()
	problem := ""
	if err := harness.CheckHost(context.Background()); err != nil {
		problem = err.Error()
	} else if missing := harness.MissingTools(tools...); len(missing) > 0 {
		problem = "needs " + missing[0].Command + " (Debian package " + missing[0].Package() + "; hack/host-deps.sh installs it)"
	}
	if problem == "" {
		return
	}
	if os.Getenv("CI") == "" {
		t.Skipf("end-to-end cluster unavailable on this machine: %s; CI=true makes this a failure", problem)
	}
	t.Fatalf("end-to-end cluster required under CI: %s", problem)
}
