package integration

import (
	"os"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// TestMain stops what the tests shared: the grid API control plane and the
// commands testbin built.
func TestMain(m *testing.M) {
	code := m.Run()
	gridAPIPlane.Stop()
	testbin.Cleanup()
	os.Exit(code)
}
