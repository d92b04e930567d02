package realnode

import (
	"context"
	"testing"
)

func TestZZWarm(t *testing.T) {
	p, err := debianRootfs(context.Background())
	t.Log(p, err)
}
