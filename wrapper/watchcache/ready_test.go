package watchcache

import "testing"

// The readiness state machine: a snapshot is served only from Pending and
// only until it is refused; a refusal takes it off and counts once; Live
// and Stop end it; Check says why it is not ready (a block first), and
// onChange hears each change of Check's verdict once.
func TestReady(t *testing.T) {
	var heard []bool
	r := NewReady(func(ok bool) { heard = append(heard, ok) })
	check := func(step string, state ReadyState, why string) {
		t.Helper()
		got := ""
		if err := r.Check(); err != nil {
			got = err.Error()
		}
		if r.State() != state || got != why || r.Serving() != (state == Snapshot || state == Live) {
			t.Errorf("%s: state %d, check %q, serving %v; want state %d, check %q", step, r.State(), got, r.Serving(), state, why)
		}
	}
	check("new", Pending, "caches not synced")
	r.Waiting("waiting for Node n")
	check("waiting", Pending, "waiting for Node n")
	if !r.ServeSnapshot() {
		t.Fatal("a snapshot was not served from Pending")
	}
	check("snapshot", Snapshot, "")
	r.Block(":1", "port 1 taken")
	check("blocked", Snapshot, "port 1 taken")
	r.Block(":2", "port 2 taken")
	check("blocked twice", Snapshot, "port 1 taken; port 2 taken")
	r.Block(":1", "")
	check("one unblocked", Snapshot, "port 2 taken")
	r.Block(":2", "")
	check("unblocked", Snapshot, "")
	if !r.RefuseSnapshot("not serving the snapshot: forbidden") || r.RefuseSnapshot("again") {
		t.Fatal("a refusal did not count exactly once")
	}
	check("refused", Pending, "not serving the snapshot: forbidden")
	if r.ServeSnapshot() {
		t.Fatal("a refused snapshot was served again")
	}
	r.Live()
	check("live", Live, "")
	if r.ServeSnapshot() {
		t.Fatal("a snapshot was served after Live")
	}
	r.Stop()
	check("stopped", Stopped, "not serving the snapshot: forbidden")
	r.Live()
	check("live after stop", Stopped, "not serving the snapshot: forbidden")
	want := []bool{true, false, true, false, true, false}
	if len(heard) != len(want) {
		t.Fatalf("onChange heard %v, want %v", heard, want)
	}
	for i := range want {
		if heard[i] != want[i] {
			t.Fatalf("onChange heard %v, want %v", heard, want)
		}
	}
}
