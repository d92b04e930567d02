package topology

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// EndpointNodes names a filtered Service under every node one of its
// endpoints is on (slices and v1 Endpoints, ready or not) and forgets it
// when it is no longer filtered.
func TestEndpointNodes(t *testing.T) {
	n0, n1, n2 := "node0", "node1", "node2"
	sl := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{NodeName: &n0}, {NodeName: &n1}, {}}}
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{NodeName: &n2}}}}}
	nodes := EndpointNodes{}
	nodes.Record("ns/a", true, []*discoveryv1.EndpointSlice{sl}, ep)
	nodes.Record("ns/b", true, []*discoveryv1.EndpointSlice{sl}, nil)
	nodes.Record("ns/plain", false, []*discoveryv1.EndpointSlice{sl}, ep)
	for node, want := range map[string][]string{n0: {"ns/a", "ns/b"}, n1: {"ns/a", "ns/b"}, n2: {"ns/a"}, "other": nil} {
		got := nodes.On(node)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("On(%s) = %v, want %v", node, got, want)
		}
	}
	nodes.Record("ns/a", false, nil, nil)
	if got := nodes.On(n2); len(got) != 0 {
		t.Errorf("On(node2) after ns/a is no longer filtered = %v, want none", got)
	}
}
