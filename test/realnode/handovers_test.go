package realnode

import (
	"os"
	"strconv"
	"testing"
)

// extraHandovers: SERVICEGROUP_REALNODE_HANDOVERS, how many more times the
// install step hands each node back to the stock kube-proxy and over to
// kube-proxy-edge again (0 when unset).
func extraHandovers(t *testing.T) int {
	v := os.Getenv("SERVICEGROUP_REALNODE_HANDOVERS")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("SERVICEGROUP_REALNODE_HANDOVERS=%q: want a count of handovers, 0 or more", v)
	}
	return n
}
