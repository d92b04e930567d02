package siteid

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// hack/fuzz-smoke.sh runs these in `make test`.

// A leader identity read from the Lease or a peer's answer: accepted only
// when it is exactly what Identity writes.
func FuzzParseLeaderIdentity(f *testing.F) {
	pin := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, id := range []string{"node0@10.0.0.1:51009#" + pin, "@a#" + pin, "n@#" + pin, "n@a@b#" + pin + "#x", "n@a#short"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		node, addr, pin, ok := Parse(id)
		if !ok {
			return
		}
		if node == "" || addr == "" || len(pin) != 64 {
			t.Fatalf("%q accepted as node %q, address %q, pin %q", id, node, addr, pin)
		}
		if again := Identity(node, addr, pin); again != id {
			t.Fatalf("%q accepted but writes back as %q", id, again)
		}
	})
}

// A /site answer from a peer, decoded as sitestream's askSite does:
// whatever it holds, the members a wrapper remembers stay bounded and well
// formed.
func FuzzSiteView(f *testing.F) {
	pin := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	f.Add([]byte(`{"leader":"node0@10.0.0.1:51009#` + pin + `","members":["node1@10.0.0.2:51009#` + pin + `","bad"]}`))
	f.Add([]byte(`{"members":[` + "\"\"" + `]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var v View
		if err := json.NewDecoder(io.LimitReader(bytes.NewReader(body), 1<<20)).Decode(&v); err != nil {
			return
		}
		m := NewMembers()
		m.Add(v.Members...)
		m.Add(v.Leader)
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.seen) > MaxMembers {
			t.Fatalf("%d members remembered, more than %d", len(m.seen), MaxMembers)
		}
		for id := range m.seen {
			if _, _, _, ok := Parse(id); !ok {
				t.Fatalf("remembered %q, which is no identity", id)
			}
		}
	})
}

// Every site label value names a valid Lease, never one another value has.
func FuzzSiteLeaseName(f *testing.F) {
	for _, s := range []string{"shop", "Shop_1", "a.b", "A", "0-0", "x_Y.z"} {
		f.Add(s, s+"_")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(validation.IsValidLabelValue(a)) > 0 || len(validation.IsValidLabelValue(b)) > 0 || a == "" || b == "" {
			return
		}
		na, nb := LeaseName(a), LeaseName(b)
		if msgs := validation.IsDNS1123Subdomain(na); len(msgs) > 0 {
			t.Fatalf("%q: Lease %q is no object name: %v", a, na, msgs)
		}
		if a != b && na == nb {
			t.Fatalf("%q and %q share the Lease %q", a, b, na)
		}
	})
}
