package topology

import "iter"

// Nodes is a view over node labels: the labels of this node (Self, nil when
// this node is unknown) and a lookup for any other node. It is a pure view so
// the decision can be tested and fuzzed without informers.
type Nodes struct {
	// Self holds this node's labels; nil when this node is unknown.
	Self map[string]string
	// Labels returns the labels of a node, false when the node is unknown.
	Labels func(name string) (map[string]string, bool)
}

// Matches reports whether an endpoint on nodeName is in this node's
// topology domain for key. "*" matches every endpoint; an endpoint without a
// node, on an unknown node, or with no value of key never matches a real key.
func (n Nodes) Matches(key, nodeName string) bool {
	if key == AnyKey {
		return true
	}
	if nodeName == "" || n.Labels == nil {
		return false
	}
	want, ok := n.Self[key]
	if !ok {
		return false
	}
	labels, ok := n.Labels(nodeName)
	if !ok {
		return false
	}
	got, ok := labels[key]
	return ok && got == want
}

// Choose returns the first key matched by at least one of the usable
// endpoints' nodes, and false when none is (then nothing is served).
func (n Nodes) Choose(keys []string, usableNodes iter.Seq[string]) (string, bool) {
	for _, key := range keys {
		for node := range usableNodes {
			if n.Matches(key, node) {
				return key, true
			}
		}
	}
	return "", false
}
