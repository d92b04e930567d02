package controller

import "testing"

func TestUntrustedGridKey(t *testing.T) {
	for key, want := range map[string]bool{
		"node-restriction.kubernetes.io/zone":      true,
		"edge.node-restriction.kubernetes.io/zone": true,
		"zone1":                       false,
		"topology.kubernetes.io/zone": false,
		"node-restriction.kubernetes.io.evil.com/zone": false,
		"evilnode-restriction.kubernetes.io/zone":      false,
		"node-restriction.kubernetes.io":               false,
	} {
		if err := untrustedGridKey(key); (err == nil) != want {
			t.Errorf("untrustedGridKey(%q) = %v", key, err)
		}
	}
}
