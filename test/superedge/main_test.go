package superedge

import (
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }
