package topology

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestUsable: the two rules over every combination of conditions. They
// differ exactly for an endpoint that is serving but not ready (a draining
// endpoint): kube-proxy still uses it when nothing is ready, a DNS answer
// does not name it.
func TestUsable(t *testing.T) {
	tr, fa := true, false
	states := []*bool{nil, &tr, &fa}
	show := func(b *bool) string {
		if b == nil {
			return "unset"
		}
		if *b {
			return "true"
		}
		return "false"
	}
	for _, ready := range states {
		for _, serving := range states {
			for _, terminating := range states {
				c := discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}
				readyish := ready == nil || *ready
				draining := !readyish && serving != nil && *serving
				if got := DNSUsable(c); got != readyish {
					t.Errorf("DNSUsable(ready=%s serving=%s terminating=%s) = %v", show(ready), show(serving), show(terminating), got)
				}
				if got := ProxyUsable(c); got != (readyish || draining) {
					t.Errorf("ProxyUsable(ready=%s serving=%s terminating=%s) = %v", show(ready), show(serving), show(terminating), got)
				}
			}
		}
	}
}
