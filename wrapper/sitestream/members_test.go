package sitestream

import (
	"fmt"
	"strings"
	"testing"
)

// What peers say about the site's members is bounded and checked: only
// wrapper identities are kept, at most maxMembers of them.
func TestSiteMembers(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	m := newSiteMembers()
	m.add("", "node0", "node0@10.0.0.1:51009", "node0@10.0.0.1:51009#short", "@10.0.0.1:51009#"+pin)
	if got := m.list(); len(got) != 0 {
		t.Errorf("kept identities that are not a wrapper's: %v", got)
	}
	a, b := leaderIdentity("node1", "10.0.0.2:51009", pin), leaderIdentity("node0", "10.0.0.1:51009", pin)
	m.add(a, b, a)
	if got := m.list(); strings.Join(got, ",") != b+","+a {
		t.Errorf("members %v, want [%s %s]", got, b, a)
	}
	for i := range 2 * maxMembers {
		m.add(leaderIdentity(fmt.Sprintf("n%d", i), "10.1.0.1:51009", pin))
	}
	if got := len(m.list()); got != maxMembers {
		t.Errorf("%d members kept, want the bound %d", got, maxMembers)
	}
}
