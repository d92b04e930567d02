package nodelabels

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// recorder is a Sink that keeps what it was told and counts the calls.
type recorder struct {
	labels        map[string]map[string]string
	sets, deletes int
}

func (r *recorder) Set(name string, labels map[string]string, _ any) {
	r.labels[name] = labels
	r.sets++
}

func (r *recorder) Delete(name string) {
	delete(r.labels, name)
	r.deletes++
}

func summary(name string, nodes map[string]string) *superedgev1.NodeLabelSummary {
	s := &superedgev1.NodeLabelSummary{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, n := range sets.List(sets.KeySet(nodes)) {
		s.Nodes = append(s.Nodes, superedgev1.NodeLabels{Name: n, Labels: map[string]string{"zone": nodes[n]}})
	}
	return s
}

func zones(r *recorder) map[string]string {
	out := map[string]string{}
	for n, l := range r.labels {
		out[n] = l["zone"]
	}
	return out
}

// TestSummaryMirror: the sink hears each node's labels once per change; a
// node listed by two summaries belongs to the first; a node dropped from its
// summary is deleted; a deleted summary keeps its nodes' labels until the
// next source has listed every node.
func TestSummaryMirror(t *testing.T) {
	r := &recorder{labels: map[string]map[string]string{}}
	n := New(nil, nil, Nodes{}, r)
	m := &summaryMirror{n: n, owner: map[string]string{}}
	check := func(step string, want map[string]string, sets, deletes int) {
		t.Helper()
		if got := zones(r); !maps.Equal(got, want) || r.sets != sets || r.deletes != deletes {
			t.Fatalf("%s: sink has %v after %d sets, %d deletes; want %v, %d, %d", step, got, r.sets, r.deletes, want, sets, deletes)
		}
	}

	a := summary("a", map[string]string{"n1": "x", "n2": "x"})
	m.apply(nil, a)
	check("first summary", map[string]string{"n1": "x", "n2": "x"}, 2, 0)

	b := summary("b", map[string]string{"n2": "y", "n3": "y"})
	m.apply(nil, b)
	check("duplicate n2 ignored", map[string]string{"n1": "x", "n2": "x", "n3": "y"}, 3, 0)

	a2 := summary("a", map[string]string{"n1": "x"})
	m.apply(a, a2)
	check("n2 dropped from its owner", map[string]string{"n1": "x", "n3": "y"}, 3, 1)

	m.apply(b, b)
	check("resync: n2 now b's, unchanged n3 not told again", map[string]string{"n1": "x", "n2": "y", "n3": "y"}, 4, 1)

	m.forget(a2)
	check("deleted summary keeps labels", map[string]string{"n1": "x", "n2": "y", "n3": "y"}, 4, 1)
	if _, ok := m.owner["n1"]; ok {
		t.Fatal("deleted summary still owns n1")
	}

	n.locked(func() { n.dropAllBut(sets.KeySet(m.owner)) })
	check("synced source drops the rest", map[string]string{"n2": "y", "n3": "y"}, 4, 2)
}

// TestNodeSwitch: labels equal to what the sink has are not told again, so
// a source switch that lists the same labels costs the sink nothing.
func TestNodeSwitch(t *testing.T) {
	r := &recorder{labels: map[string]map[string]string{}}
	n := New(nil, nil, Nodes{}, r)
	n.locked(func() { n.set("n1", map[string]string{"zone": "x"}, nil) })
	n.locked(func() { n.set("n1", map[string]string{"zone": "x"}, &struct{}{}) })
	n.locked(func() { n.remove("n9") })
	if r.sets != 1 || r.deletes != 0 {
		t.Fatalf("sink told %d sets, %d deletes; want 1, 0", r.sets, r.deletes)
	}
	n.locked(func() { n.set("n1", map[string]string{"zone": "y"}, nil) })
	if r.sets != 2 || r.labels["n1"]["zone"] != "y" {
		t.Fatalf("relabel not told: %d sets, %v", r.sets, r.labels)
	}
}

// TestSlimSummary keeps what the mirror reads and drops the rest.
func TestSlimSummary(t *testing.T) {
	s := summary("a", map[string]string{"n1": "x"})
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "controller"}}
	s.Keys = []string{"zone"}
	out, err := slimSummary(s)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*superedgev1.NodeLabelSummary)
	if got.Name != "a" || len(got.Nodes) != 1 || got.ManagedFields != nil || got.Keys != nil {
		t.Fatalf("slimmed to %+v", got)
	}
}
