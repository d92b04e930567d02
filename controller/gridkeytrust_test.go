package controller

import (
	"strings"
	"testing"
)

// TestUntrustedGridKey: which keys a kubelet cannot set on its own Node is
// topology.IsNodeRestrictedKey's rule (its table is in package topology);
// here, that the controller follows it, and that a refused key's error
// names the key to use instead.
func TestUntrustedGridKey(t *testing.T) {
	for _, key := range []string{"node-restriction.kubernetes.io/zone", "edge.node-restriction.kubernetes.io/zone"} {
		if err := untrustedGridKey(key); err != nil {
			t.Errorf("untrustedGridKey(%q) = %v, want nil", key, err)
		}
	}
	for _, key := range []string{"zone1", "topology.kubernetes.io/zone", "node-restriction.kubernetes.io.evil.com/zone"} {
		err := untrustedGridKey(key)
		if err == nil {
			t.Errorf("untrustedGridKey(%q) = nil, want an error", key)
			continue
		}
		if want := NodeRestrictionDomain + "/" + lastSegment(key); !strings.Contains(err.Error(), want) {
			t.Errorf("untrustedGridKey(%q) = %v, want it to name %s", key, err, want)
		}
	}
}
