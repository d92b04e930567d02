package informers

import (
	"fmt"
	"testing"
)

// TestPackedSelector: a 10k-name pod selector kept deflated gives back the
// same selector, in a small fraction of its size.
func TestPackedSelector(t *testing.T) {
	var names []string
	for i := range 10000 {
		names = append(names, fmt.Sprintf("statefulsetgrid-demo-nodeunit1-%d", i))
	}
	sel := selectorOf(names, false)
	p := packSelector(sel)
	if got := p.String(); got != sel {
		t.Fatalf("inflated %d bytes, want the %d of the selector", len(got), len(sel))
	}
	if len(p.deflated) > len(sel)/10 {
		t.Errorf("deflated %d of %d bytes", len(p.deflated), len(sel))
	}
	if !p.is(sel) || p.is(selectorOf(names[1:], false)) || p.is(sel[:len(sel)-2]+"x)") {
		t.Error("is: a selector compares unlike itself")
	}
	if e := packSelector(""); e.String() != "" || !e.is("") || e.is(sel) {
		t.Error("the empty selector does not round-trip")
	}
	// Bytes that do not inflate to the selector widen the selection to
	// every StatefulSet pod instead of stopping DNS.
	bad := p
	bad.deflated = p.deflated[:len(p.deflated)/2]
	if got := bad.String(); got != statefulPodSelector {
		t.Errorf("truncated: got %.40q, want every StatefulSet pod (%q)", got, statefulPodSelector)
	}
	if bad.is(sel) {
		t.Error("truncated: compares equal to the selector it lost")
	}
}
