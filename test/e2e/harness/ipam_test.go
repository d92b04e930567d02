package harness

import (
	"net"
	"testing"
)

// A released address is not handed out again before the rest of the range:
// a recreated Pod gets a new IP, as with CNI's host-local IPAM.
func TestPodIPAMNextFit(t *testing.T) {
	_, cidr, _ := net.ParseCIDR("10.244.3.0/24")
	p := newPodIPAM(cidr)
	first, err := p.allocate()
	if err != nil {
		t.Fatal(err)
	}
	if first.String() != "10.244.3.2" {
		t.Fatalf("first address %s, want 10.244.3.2", first)
	}
	p.release(first)
	if next, _ := p.allocate(); next.String() != "10.244.3.3" {
		t.Fatalf("after release: %s, want 10.244.3.3 (next-fit)", next)
	}
	for range 251 { // .4 .. .254
		if _, err := p.allocate(); err != nil {
			t.Fatal(err)
		}
	}
	if wrapped, _ := p.allocate(); wrapped.String() != "10.244.3.2" {
		t.Fatalf("after the range: %s, want the released 10.244.3.2", wrapped)
	}
	if _, err := p.allocate(); err == nil {
		t.Fatal("exhausted range handed out an address")
	}
}
