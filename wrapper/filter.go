package wrapper

import (
	"iter"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Topology tells whether an endpoint's node shares a label value with this
// node. It is a pure view over node labels so the filter can be tested and
// fuzzed without informers.
type Topology struct {
	// Self holds this node's labels; nil when this node is unknown.
	Self map[string]string
	// Nodes returns the labels of a node, false when the node is unknown.
	Nodes func(name string) (map[string]string, bool)
}

// matches reports whether an endpoint on nodeName matches key for this node.
func (t Topology) matches(key string, nodeName *string) bool {
	if key == AnyKey {
		return true
	}
	if nodeName == nil || *nodeName == "" || t.Nodes == nil {
		return false
	}
	want, ok := t.Self[key]
	if !ok {
		return false
	}
	labels, ok := t.Nodes(*nodeName)
	if !ok {
		return false
	}
	got, ok := labels[key]
	return ok && got == want
}

// chooseKey returns the first key matched by at least one usable endpoint.
func (t Topology) chooseKey(keys []string, usable iter.Seq[*string]) (string, bool) {
	for _, key := range keys {
		for node := range usable {
			if t.matches(key, node) {
				return key, true
			}
		}
	}
	return "", false
}

// sliceEndpointUsable: ready or serving, with unset ready counting as ready.
func sliceEndpointUsable(ep *discoveryv1.Endpoint) bool {
	c := ep.Conditions
	return c.Ready == nil || *c.Ready || (c.Serving != nil && *c.Serving)
}

// FilterEndpointSlices returns copies of all EndpointSlices of one Service
// keeping only the endpoints that match the first qualifying topology key,
// decided across all slices together. Hints are dropped from every endpoint.
// The inputs are never modified.
func FilterEndpointSlices(keys []string, t Topology, slices []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	usable := func(yield func(*string) bool) {
		for _, s := range slices {
			for i := range s.Endpoints {
				if sliceEndpointUsable(&s.Endpoints[i]) && !yield(s.Endpoints[i].NodeName) {
					return
				}
			}
		}
	}
	key, ok := t.chooseKey(keys, usable)
	out := make([]*discoveryv1.EndpointSlice, 0, len(slices))
	for _, s := range slices {
		c := s.DeepCopy()
		kept := make([]discoveryv1.Endpoint, 0, len(c.Endpoints))
		for _, ep := range c.Endpoints {
			if ok && t.matches(key, ep.NodeName) {
				ep.Hints = nil
				kept = append(kept, ep)
			}
		}
		c.Endpoints = kept
		out = append(out, c)
	}
	return out
}

// FilterEndpoints is FilterEndpointSlices for a v1 Endpoints object: an entry
// of addresses is usable, notReadyAddresses are kept only when they match.
// Subsets left without any address are dropped.
func FilterEndpoints(keys []string, t Topology, ep *corev1.Endpoints) *corev1.Endpoints {
	usable := func(yield func(*string) bool) {
		for _, ss := range ep.Subsets {
			for i := range ss.Addresses {
				if !yield(ss.Addresses[i].NodeName) {
					return
				}
			}
		}
	}
	key, ok := t.chooseKey(keys, usable)
	c := ep.DeepCopy()
	keep := func(in []corev1.EndpointAddress) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, a := range in {
			if ok && t.matches(key, a.NodeName) {
				out = append(out, a)
			}
		}
		return out
	}
	subsets := make([]corev1.EndpointSubset, 0, len(c.Subsets))
	for _, ss := range c.Subsets {
		ss.Addresses = keep(ss.Addresses)
		ss.NotReadyAddresses = keep(ss.NotReadyAddresses)
		if len(ss.Addresses)+len(ss.NotReadyAddresses) > 0 {
			subsets = append(subsets, ss)
		}
	}
	c.Subsets = subsets
	return c
}
