package siteid

import (
	"strings"
	"testing"
)

// Only what Identity writes names a wrapper: a node, an address and a
// whole pin.
func TestParse(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	for _, id := range []string{"", "node0", "node0@1.2.3.4:5", "@1.2.3.4:5#" + pin, "node0@#" + pin, "node0@1.2.3.4:5#abc"} {
		if _, _, _, ok := Parse(id); ok {
			t.Errorf("identity %q accepted", id)
		}
	}
	if n, a, p, ok := Parse(Identity("node0", "1.2.3.4:5", pin)); !ok || n != "node0" || a != "1.2.3.4:5" || p != pin {
		t.Errorf("round trip: %q %q %q %v", n, a, p, ok)
	}
}
