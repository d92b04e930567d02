package siteid

import (
	"fmt"
	"strings"
	"testing"
)

// What peers say about the site's members is bounded and checked: only
// wrapper identities are kept, at most MaxMembers of them.
func TestSiteMembers(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	m := NewMembers()
	m.Add("", "node0", "node0@10.0.0.1:51009", "node0@10.0.0.1:51009#short", "@10.0.0.1:51009#"+pin)
	if got := m.List(); len(got) != 0 {
		t.Errorf("kept identities that are not a wrapper's: %v", got)
	}
	a, b := Identity("node1", "10.0.0.2:51009", pin), Identity("node0", "10.0.0.1:51009", pin)
	m.Add(a, b, a)
	if got := m.List(); strings.Join(got, ",") != b+","+a {
		t.Errorf("members %v, want [%s %s]", got, b, a)
	}
	for i := range 2 * MaxMembers {
		m.Add(Identity(fmt.Sprintf("n%d", i), "10.1.0.1:51009", pin))
	}
	if got := len(m.List()); got != MaxMembers {
		t.Errorf("%d members kept, want the bound %d", got, MaxMembers)
	}
}
