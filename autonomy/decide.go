package autonomy

import (
	"sort"
	"time"
)

// Node is what the rule reads of a Node.
type Node struct {
	Name   string
	Labels map[string]string
	// Unreachable: the node lifecycle controller set its Ready condition to
	// Unknown (the kubelet stopped renewing its Lease). A node whose
	// kubelet reports NotReady (Ready False) is reachable: it talks to the
	// cloud.
	Unreachable bool
	// Ready: its kubelet reports it Ready (the condition True).
	Ready bool
	// Since is when the Ready condition last changed (its
	// lastTransitionTime): when an unreachable node turned unreachable, and
	// when a reachable one turned reachable (or Ready) last.
	Since time.Time
}

// Grid is a grid that opted in: its nodeunits are the values of Key.
type Grid struct {
	Kind, Namespace, Name string
	Key                   string
	Duration              time.Duration
}

// Unit names a nodeunit: the nodes whose label Key has Value.
type Unit struct {
	Key, Value string
}

// State is where a nodeunit stands in the rule.
type State string

const (
	// Connected: no node of the nodeunit is unreachable.
	Connected State = "Connected"
	// Deciding: some nodes turned unreachable less than the decision window
	// ago and others are still reachable; if the nodeunit is cut off they
	// follow within the window. The unreachable ones keep their pods
	// meanwhile.
	Deciding State = "Deciding"
	// NodeFailure: unreachable nodes beside reachable ones, past the window:
	// those nodes failed alone, and the default handling applies to them.
	NodeFailure State = "NodeFailure"
	// CutOff: every node unreachable, within the autonomy duration: pods stay
	// Ready and unevicted.
	CutOff State = "CutOff"
	// Expired: every node unreachable for longer than the autonomy duration:
	// the default handling applies.
	Expired State = "Expired"
)

// Withholds reports whether the state holds back the default handling.
func (s State) Withholds() bool { return s == CutOff || s == Deciding }

// UnitStatus is a nodeunit's state at a moment.
type UnitStatus struct {
	Unit
	// Nodes and Unreachable count the nodeunit's nodes.
	Nodes, Unreachable int
	State              State
	// Since: CutOff and Expired, when the last node turned unreachable (the
	// nodeunit has been cut off since); Deciding and NodeFailure, when the
	// first did.
	Since time.Time
	// Until: CutOff and Expired, when the autonomy ends (Since + Grid's
	// duration); Deciding, when the decision window of the last node to turn
	// unreachable ends.
	Until time.Time
	// Grid is the grid whose autonomy duration applies: the longest among
	// the opted-in grids keyed on Unit.Key.
	Grid Grid
}

// NodeSource gives the nodes of a nodeunit.
type NodeSource interface {
	InUnit(key, value string) []Node
}

// Nodes is a NodeSource over a list.
type Nodes []Node

// InUnit returns the nodes whose label key has value.
func (ns Nodes) InUnit(key, value string) []Node {
	var out []Node
	for _, n := range ns {
		if v, ok := n.Labels[key]; ok && v == value {
			out = append(out, n)
		}
	}
	return out
}

// Decision is the rule's answer for one unreachable node.
type Decision struct {
	// Withhold: keep the node's pods Ready and the node without the NoExecute
	// taint, for now.
	Withhold bool
	// Stale: the node is Ready again; the node lifecycle controller acted on
	// its view from before the kubelet came back (it reads Nodes from its
	// cache once per monitor period, and its pod updates are queued with a
	// backoff), and the kubelet, which decides its pods' readiness again,
	// would only have to undo it.
	Stale bool
	// Status is the nodeunit that decided: the withholding one with the
	// latest end, else the one that let the default apply. Zero when no
	// opted-in grid is keyed on a label the node has.
	Status UnitStatus
}

// Autonomous reports whether any opted-in grid covers the node.
func (d Decision) Autonomous() bool { return d.Status.Key != "" }

// Decide applies the rule to node n (as the caller knows it best: a request
// of the node lifecycle controller about n proves n unreachable) among its
// nodeunits' nodes from src, at now. window is the decision window.
func Decide(n Node, src NodeSource, grids []Grid, now time.Time, window time.Duration) Decision {
	var best Decision
	for _, g := range longestPerKey(grids) {
		value, ok := n.Labels[g.Key]
		if !ok || value == "" {
			continue
		}
		members := withNode(src.InUnit(g.Key, value), n)
		st := unitStatus(Unit{g.Key, value}, members, g, now, window)
		d := Decision{Status: st}
		switch st.State {
		case CutOff:
			d.Withhold = true
		case Deciding:
			// Only the nodes still inside their own window wait.
			d.Withhold = n.Unreachable && now.Before(n.Since.Add(window))
			if !d.Withhold {
				d.Status.State = NodeFailure
			}
		}
		if better(d, best) {
			best = d
		}
	}
	if best.Autonomous() && n.Ready {
		best.Withhold, best.Stale = true, true
	}
	return best
}

// better orders decisions: withholding first, the later end first; among
// those that let the default apply, an expired autonomy says the most.
func better(d, than Decision) bool {
	switch {
	case than.Status.Key == "":
		return true
	case d.Withhold != than.Withhold:
		return d.Withhold
	case d.Withhold:
		return d.Status.Until.After(than.Status.Until)
	default:
		return d.Status.State == Expired && than.Status.State != Expired
	}
}

// Units gives the state of every nodeunit of the opted-in grids that has an
// unreachable node, ordered by key and value.
func Units(nodes Nodes, grids []Grid, now time.Time, window time.Duration) []UnitStatus {
	var out []UnitStatus
	for _, g := range longestPerKey(grids) {
		byValue := map[string][]Node{}
		for _, n := range nodes {
			if v := n.Labels[g.Key]; v != "" {
				byValue[v] = append(byValue[v], n)
			}
		}
		for v, members := range byValue {
			if st := unitStatus(Unit{g.Key, v}, members, g, now, window); st.State != Connected {
				out = append(out, st)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Value < out[j].Value
	})
	return out
}

// unitStatus is the state of nodeunit u with its nodes members.
//
// A nodeunit is cut off when none of its reachable nodes has been
// reachable since before the first of its unreachable ones turned
// unreachable: either every node is unreachable, or those that are not
// turned reachable since (they were cut off too and are back, and the
// others have yet to come back). Only a node reachable all along shows that
// the unreachable ones failed alone.
func unitStatus(u Unit, members []Node, g Grid, now time.Time, window time.Duration) UnitStatus {
	st := UnitStatus{Unit: u, Nodes: len(members), Grid: g, State: Connected}
	var first, last time.Time
	for _, m := range members {
		if !m.Unreachable {
			continue
		}
		st.Unreachable++
		if first.IsZero() || m.Since.Before(first) {
			first = m.Since
		}
		if m.Since.After(last) {
			last = m.Since
		}
	}
	if st.Unreachable == 0 {
		return st
	}
	reachableAllAlong := false
	for _, m := range members {
		if !m.Unreachable && !m.Since.After(first) {
			reachableAllAlong = true
		}
	}
	if !reachableAllAlong {
		st.Since, st.Until = last, last.Add(g.Duration)
		st.State = CutOff
		if !now.Before(st.Until) {
			st.State = Expired
		}
		return st
	}
	st.Since, st.Until = first, last.Add(window)
	st.State = NodeFailure
	if now.Before(st.Until) {
		st.State = Deciding
	}
	return st
}

// withNode replaces n's entry in members by n (the caller's freshest view of
// it), adding it if missing.
func withNode(members []Node, n Node) []Node {
	for i := range members {
		if members[i].Name == n.Name {
			out := append([]Node(nil), members...)
			out[i] = n
			return out
		}
	}
	return append(append([]Node(nil), members...), n)
}

// longestPerKey keeps, per grid key, the grid with the longest duration (the
// first by kind, namespace and name among equals): a nodeunit is as
// autonomous as its most autonomous grid.
func longestPerKey(grids []Grid) []Grid {
	best := map[string]Grid{}
	for _, g := range grids {
		b, ok := best[g.Key]
		if !ok || g.Duration > b.Duration || (g.Duration == b.Duration && gridLess(g, b)) {
			best[g.Key] = g
		}
	}
	out := make([]Grid, 0, len(best))
	for _, g := range best {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func gridLess(a, b Grid) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
