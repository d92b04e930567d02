package wrapper

import (
	"strings"
	"testing"
)

// Each uid but root holds at most its budget; all of them together at
// most the total less one budget, which root always keeps; root alone may
// take the rest; a slot given back is free again.
func TestClientBudgets(t *testing.T) {
	b := newClientBudgets("watches", 10, 3)
	root, nobody, unknown := clientUID{uid: 0, known: true}, clientUID{uid: 65534, known: true}, clientUID{}
	take := func(c clientUID, n int, wantRefusal string) {
		t.Helper()
		for i := range n {
			if refused := b.acquire(c); refused != "" {
				t.Fatalf("%v's slot %d of %d refused: %s", c, i+1, n, refused)
			}
		}
		refused := b.acquire(c)
		if refused == "" || !strings.Contains(refused, wantRefusal) {
			t.Fatalf("%v past %d slots: refusal %q, want one with %q", c, n, refused, wantRefusal)
		}
	}
	take(nobody, 3, "uid 65534 holds as many watches as one local user may (3)")
	take(unknown, 3, "clients of unknown uid hold as many")
	take(clientUID{uid: 1000, known: true}, 1, "local users other than root hold all the watches they may together (7)")
	// Root's are bounded by the total only (the outer filter's): 7 held
	// by others leave it 3.
	for range 3 {
		if refused := b.acquire(root); refused != "" {
			t.Fatalf("root, with 7 of 10 held by others: %s", refused)
		}
	}
	b.release(nobody)
	if refused := b.acquire(clientUID{uid: 1001, known: true}); refused != "" {
		t.Fatalf("a slot given back by uid 65534 is not free for another uid: %s", refused)
	}
	if got := b.nonRootHeld; got != 7 {
		t.Fatalf("others hold %d, want 7", got)
	}
	for range 3 {
		b.release(root)
	}
	if _, held := b.held[root]; held {
		t.Fatal("root's count is kept after it gave every slot back")
	}
}
