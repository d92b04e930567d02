package gridhosts

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
}
