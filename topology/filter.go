package topology

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// FilterEndpointSlices returns new EndpointSlices for all EndpointSlices of
// one Service keeping only the endpoints that match the first qualifying
// topology key, decided across all slices together; an endpoint qualifies a
// key when ProxyUsable (ready or serving). Hints are dropped from
// every endpoint. The inputs are never modified; the results share what they
// keep of them (a new top-level struct and endpoint list, the rest is the
// input's), so neither may be modified afterwards.
func FilterEndpointSlices(keys []string, t Nodes, slices []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	usable := func(yield func(string) bool) {
		for _, s := range slices {
			for i := range s.Endpoints {
				if ProxyUsable(s.Endpoints[i].Conditions) && !yield(deref(s.Endpoints[i].NodeName)) {
					return
				}
			}
		}
	}
	key, ok := t.Choose(keys, usable)
	out := make([]*discoveryv1.EndpointSlice, 0, len(slices))
	for _, s := range slices {
		c := shareTop(s)
		// Sized exactly: a nodeunit usually keeps a small share of them.
		n := 0
		for i := range c.Endpoints {
			if ok && t.Matches(key, deref(c.Endpoints[i].NodeName)) {
				n++
			}
		}
		kept := make([]discoveryv1.Endpoint, 0, n)
		for _, ep := range c.Endpoints { // ep is a copy of the struct: Hints=nil stays ours
			if ok && t.Matches(key, deref(ep.NodeName)) {
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
// Subsets left without any address are dropped. Like FilterEndpointSlices it
// shares what it keeps of ep.
func FilterEndpoints(keys []string, t Nodes, ep *corev1.Endpoints) *corev1.Endpoints {
	usable := func(yield func(string) bool) {
		for _, ss := range ep.Subsets {
			for i := range ss.Addresses {
				if !yield(deref(ss.Addresses[i].NodeName)) {
					return
				}
			}
		}
	}
	key, ok := t.Choose(keys, usable)
	c := shareTop(ep)
	keep := func(in []corev1.EndpointAddress) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, a := range in {
			if ok && t.Matches(key, deref(a.NodeName)) {
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

// shareTop returns a new top-level struct sharing everything p points to:
// the filter sets its own fields on it while the rest stays the informer
// cache's object, which nobody modifies (client-go's contract).
func shareTop[T any](p *T) *T {
	c := *p
	return &c
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
