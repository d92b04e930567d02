package sitestream

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// A leader identity read from the Lease or a peer's answer: accepted only
// when it is exactly what leaderIdentity writes.
func FuzzParseLeaderIdentity(f *testing.F) {
	pin := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, id := range []string{"node0@10.0.0.1:51009#" + pin, "@a#" + pin, "n@#" + pin, "n@a@b#" + pin + "#x", "n@a#short"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		node, addr, pin, ok := parseLeaderIdentity(id)
		if !ok {
			return
		}
		if node == "" || addr == "" || len(pin) != 64 {
			t.Fatalf("%q accepted as node %q, address %q, pin %q", id, node, addr, pin)
		}
		if again := leaderIdentity(node, addr, pin); again != id {
			t.Fatalf("%q accepted but writes back as %q", id, again)
		}
	})
}

// A /site answer from a peer, decoded as askSite does: whatever it holds,
// the members a wrapper remembers stay bounded and well formed.
func FuzzSiteView(f *testing.F) {
	pin := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	f.Add([]byte(`{"leader":"node0@10.0.0.1:51009#` + pin + `","members":["node1@10.0.0.2:51009#` + pin + `","bad"]}`))
	f.Add([]byte(`{"members":[` + "\"\"" + `]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var v siteView
		if err := json.NewDecoder(io.LimitReader(bytes.NewReader(body), 1<<20)).Decode(&v); err != nil {
			return
		}
		m := newSiteMembers()
		m.add(v.Members...)
		m.add(v.Leader)
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.seen) > maxMembers {
			t.Fatalf("%d members remembered, more than %d", len(m.seen), maxMembers)
		}
		for id := range m.seen {
			if _, _, _, ok := parseLeaderIdentity(id); !ok {
				t.Fatalf("remembered %q, which is no identity", id)
			}
		}
	})
}
