package topology

import (
	"slices"
	"testing"
)

func TestIsNodeRestrictedKey(t *testing.T) {
	for key, want := range map[string]bool{
		"node-restriction.kubernetes.io/zone":      true,
		"edge.node-restriction.kubernetes.io/zone": true,
		"zone1":                       false,
		"topology.kubernetes.io/zone": false,
		"node-restriction.kubernetes.io.evil.com/zone": false,
		"evilnode-restriction.kubernetes.io/zone":      false,
		"node-restriction.kubernetes.io":               false,
		"*":                                            false,
	} {
		if got := IsNodeRestrictedKey(key); got != want {
			t.Errorf("IsNodeRestrictedKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestNodeRestrictedKeys(t *testing.T) {
	const safe = NodeRestrictionDomain + "/zone"
	for _, c := range []struct {
		keys, kept, forgeable []string
	}{
		{[]string{safe}, []string{safe}, nil},
		{[]string{safe, AnyKey}, []string{safe, AnyKey}, nil},
		{[]string{"zone1"}, nil, []string{"zone1"}},
		{[]string{"zone1", AnyKey}, []string{AnyKey}, []string{"zone1"}},
		{[]string{"zone1", safe, "topology.kubernetes.io/zone"}, []string{safe}, []string{"zone1", "topology.kubernetes.io/zone"}},
	} {
		in := slices.Clone(c.keys)
		kept, forgeable := NodeRestrictedKeys(in)
		if !slices.Equal(kept, c.kept) || !slices.Equal(forgeable, c.forgeable) {
			t.Errorf("NodeRestrictedKeys(%q) = %q, %q; want %q, %q", c.keys, kept, forgeable, c.kept, c.forgeable)
		}
		if !slices.Equal(in, c.keys) {
			t.Errorf("NodeRestrictedKeys modified its input: %q", in)
		}
	}
}

// A Service keyed on a forgeable label: with the key dropped, a node that
// labelled itself into another nodeunit no longer gets that nodeunit's
// endpoints; the rule falls to "*" as for any key that does not qualify.
func TestForgeableKeyNeverMatches(t *testing.T) {
	labels := map[string]map[string]string{
		"evil":   {"zone1": "a"},
		"victim": {"zone1": "a"},
		"other":  {"zone1": "b"},
	}
	n := Nodes{Self: labels["evil"], Labels: func(name string) (map[string]string, bool) { l, ok := labels[name]; return l, ok }}
	nodes := slices.Values([]string{"victim", "other"})
	if key, ok := n.Choose([]string{"zone1"}, nodes); !ok || key != "zone1" {
		t.Fatalf("without the option: Choose = %q, %v; want zone1 (the forged label routes)", key, ok)
	}
	kept, _ := NodeRestrictedKeys([]string{"zone1"})
	if key, ok := n.Choose(kept, nodes); ok {
		t.Errorf("forgeable key alone: Choose = %q, want nothing served", key)
	}
	kept, _ = NodeRestrictedKeys([]string{"zone1", AnyKey})
	if key, ok := n.Choose(kept, nodes); !ok || key != AnyKey {
		t.Errorf("forgeable key then *: Choose = %q, %v; want *", key, ok)
	}
}
