package autonomy

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

const window = 20 * time.Second

// node is a node of unit unreachable since t0+unreachableAt, or (reachable)
// Ready since an hour before t0.
func node(name, unit string, unreachableAt time.Duration) Node {
	n := Node{Name: name, Labels: map[string]string{"zone1": unit}, Since: t0.Add(-time.Hour)}
	if unreachableAt >= 0 {
		n.Unreachable, n.Since = true, t0.Add(unreachableAt)
	}
	return n
}

// back is a node reachable again (Ready) since t0+at.
func back(name, unit string, at time.Duration) Node {
	return Node{Name: name, Labels: map[string]string{"zone1": unit}, Ready: true, Since: t0.Add(at)}
}

const reachable = -1

var hourGrid = Grid{Kind: "DeploymentGrid", Namespace: "default", Name: "dg", Key: "zone1", Duration: time.Hour}

func TestDecide(t *testing.T) {
	cases := []struct {
		name      string
		nodes     Nodes
		grids     []Grid
		ask       string
		at        time.Duration
		withhold  bool
		state     State
		since     time.Duration
		until     time.Duration
		untracked bool
	}{
		{name: "a nodeunit of one node cut off", nodes: Nodes{node("a", "u1", 0), node("b", "u2", reachable)}, grids: []Grid{hourGrid},
			ask: "a", at: time.Second, withhold: true, state: CutOff, since: 0, until: time.Hour},
		{name: "the autonomy ends", nodes: Nodes{node("a", "u1", 0)}, grids: []Grid{hourGrid},
			ask: "a", at: time.Hour, withhold: false, state: Expired, since: 0, until: time.Hour},
		{name: "every node of the nodeunit unreachable: counted from the last", nodes: Nodes{node("a", "u1", 0), node("b", "u1", 12*time.Second)}, grids: []Grid{hourGrid},
			ask: "a", at: 13 * time.Second, withhold: true, state: CutOff, since: 12 * time.Second, until: time.Hour + 12*time.Second},
		{name: "a peer still reachable, inside the window", nodes: Nodes{node("a", "u1", 0), node("b", "u1", reachable)}, grids: []Grid{hourGrid},
			ask: "a", at: 5 * time.Second, withhold: true, state: Deciding, since: 0, until: window},
		{name: "a peer still reachable past the window: a node failure", nodes: Nodes{node("a", "u1", 0), node("b", "u1", reachable)}, grids: []Grid{hourGrid},
			ask: "a", at: window, withhold: false, state: NodeFailure, since: 0, until: window},
		{name: "past its own window while a later peer's runs: a node failure", nodes: Nodes{node("a", "u1", 0), node("b", "u1", 15*time.Second), node("c", "u1", reachable)}, grids: []Grid{hourGrid},
			ask: "a", at: 25 * time.Second, withhold: false, state: NodeFailure, since: 0, until: 15*time.Second + window},
		{name: "the link back, a peer reachable again first: still cut off", nodes: Nodes{node("a", "u1", 0), back("b", "u1", 75*time.Second)}, grids: []Grid{hourGrid},
			ask: "a", at: 76 * time.Second, withhold: true, state: CutOff, since: 0, until: time.Hour},
		{name: "a peer reachable since just before: a node failure", nodes: Nodes{node("a", "u1", 0), back("b", "u1", -time.Second)}, grids: []Grid{hourGrid},
			ask: "a", at: window, withhold: false, state: NodeFailure, since: 0, until: window},
		{name: "no opted-in grid keyed on its labels", nodes: Nodes{node("a", "u1", 0)}, grids: []Grid{{Key: "other", Duration: time.Hour}},
			ask: "a", at: time.Second, untracked: true},
		{name: "an empty label value is no nodeunit", nodes: Nodes{{Name: "a", Labels: map[string]string{"zone1": ""}, Unreachable: true, Since: t0}}, grids: []Grid{hourGrid},
			ask: "a", at: time.Second, untracked: true},
		{name: "the longest grid on a key applies", nodes: Nodes{node("a", "u1", 0)}, grids: []Grid{hourGrid, {Kind: "StatefulSetGrid", Namespace: "x", Name: "long", Key: "zone1", Duration: 3 * time.Hour}},
			ask: "a", at: 2 * time.Hour, withhold: true, state: CutOff, since: 0, until: 3 * time.Hour},
		{name: "a nodeunit of another key withholds though this one lets go", grids: []Grid{hourGrid, {Key: "site", Duration: time.Hour}},
			nodes: Nodes{
				{Name: "a", Labels: map[string]string{"zone1": "u1", "site": "s1"}, Unreachable: true, Since: t0},
				{Name: "b", Labels: map[string]string{"zone1": "u1"}},
			},
			ask: "a", at: time.Minute, withhold: true, state: CutOff, since: 0, until: time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var n Node
			for _, m := range c.nodes {
				if m.Name == c.ask {
					n = m
				}
			}
			d := Decide(n, c.nodes, c.grids, t0.Add(c.at), window)
			if c.untracked {
				if d.Autonomous() || d.Withhold {
					t.Fatalf("got %+v, want no autonomy", d)
				}
				return
			}
			if d.Withhold != c.withhold || d.Status.State != c.state || !d.Status.Since.Equal(t0.Add(c.since)) || !d.Status.Until.Equal(t0.Add(c.until)) {
				t.Fatalf("got withhold=%v %s since %s until %s, want withhold=%v %s since %s until %s", d.Withhold, d.Status.State,
					d.Status.Since.Sub(t0), d.Status.Until.Sub(t0), c.withhold, c.state, c.since, c.until)
			}
		})
	}
}

// The caller's view of the node asked about wins over a source that has not
// seen it turn unreachable yet (the node lifecycle controller writes the
// node's status just before it marks the pods).
func TestDecideTakesTheFreshestNode(t *testing.T) {
	stale := Nodes{node("a", "u1", reachable)}
	fresh := node("a", "u1", 0)
	d := Decide(fresh, stale, []Grid{hourGrid}, t0.Add(time.Second), window)
	if !d.Withhold || d.Status.State != CutOff || d.Status.Nodes != 1 {
		t.Fatalf("got %+v, want a cut-off nodeunit of one node", d)
	}
	// A node the source does not know joins its nodeunit.
	d = Decide(node("new", "u1", 0), Nodes{node("b", "u1", reachable)}, []Grid{hourGrid}, t0.Add(time.Second), window)
	if d.Status.Nodes != 2 || d.Status.State != Deciding {
		t.Fatalf("got %+v, want deciding among 2 nodes", d)
	}
}

func TestUnits(t *testing.T) {
	nodes := Nodes{
		node("a", "u1", 0), node("b", "u1", 2*time.Second),
		node("c", "u2", 0), node("d", "u2", reachable),
		node("e", "u3", reachable),
	}
	got := Units(nodes, []Grid{hourGrid}, t0.Add(time.Minute), window)
	if len(got) != 2 {
		t.Fatalf("got %d nodeunits, want u1 and u2: %+v", len(got), got)
	}
	if u := got[0]; u.Value != "u1" || u.State != CutOff || u.Nodes != 2 || u.Unreachable != 2 || !u.Until.Equal(t0.Add(time.Hour+2*time.Second)) {
		t.Errorf("u1: %+v", u)
	}
	if u := got[1]; u.Value != "u2" || u.State != NodeFailure || u.Nodes != 2 || u.Unreachable != 1 {
		t.Errorf("u2: %+v", u)
	}
}

func TestParseDuration(t *testing.T) {
	for v, want := range map[string]time.Duration{"1m": time.Minute, "2h": 2 * time.Hour, "720h": MaxDuration} {
		if d, err := ParseDuration(v); err != nil || d != want {
			t.Errorf("%q: got %v, %v; want %v", v, d, err, want)
		}
	}
	for _, v := range []string{"", "2", "59s", "721h", "-1h", "forever", "1h "} {
		if _, err := ParseDuration(v); err == nil {
			t.Errorf("%q: accepted", v)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"2h", "", "90m", "1e9h", "-5m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && (d < MinDuration || d > MaxDuration) {
			t.Fatalf("%q accepted as %v, out of bounds", s, d)
		}
	})
}

// A write of the node lifecycle controller about a node that is Ready again
// acts on an old view: withheld; about a node that reports NotReady, not.
func TestDecideStaleWrite(t *testing.T) {
	nodes := Nodes{back("a", "u1", 75*time.Second), back("b", "u1", 76*time.Second)}
	if d := Decide(nodes[0], nodes, []Grid{hourGrid}, t0.Add(80*time.Second), window); !d.Withhold || !d.Stale {
		t.Fatalf("a Ready node: %+v", d)
	}
	notReady := Node{Name: "a", Labels: map[string]string{"zone1": "u1"}, Since: t0}
	if d := Decide(notReady, Nodes{notReady}, []Grid{hourGrid}, t0.Add(time.Second), window); d.Withhold {
		t.Fatalf("a NotReady node: %+v", d)
	}
	if d := Decide(back("x", "none", 0), Nodes{}, []Grid{{Key: "other", Duration: time.Hour}}, t0, window); d.Withhold {
		t.Fatalf("a Ready node no grid covers: %+v", d)
	}
}
