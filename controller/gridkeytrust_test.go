package controller

import "testing"

func TestIsNodeRestrictedKey(t *testing.T) {
	for key, want := range map[string]bool{
		"node-restriction.kubernetes.io/zone":      true,
		"edge.node-restriction.kubernetes.io/zone": true,
		"zone1":                       false,
		"topology.kubernetes.io/zone": false,
		"node-restriction.kubernetes.io.evil.com/zone": false,
		"evilnode-restriction.kubernetes.io/zone":      false,
		"node-restriction.kubernetes.io":               false,
	} {
		if got := IsNodeRestrictedKey(key); got != want {
			t.Errorf("IsNodeRestrictedKey(%q) = %v, want %v", key, got, want)
		}
		if err := untrustedGridKey(key); (err == nil) != want {
			t.Errorf("untrustedGridKey(%q) = %v", key, err)
		}
	}
}
