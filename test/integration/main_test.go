package integration

import (
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// TestMain stops what the tests shared: the grid API control plane and the
// commands testbin built.
func TestMain(m *testing.M) { testbin.Main(m, gridAPIPlane.Stop) }
