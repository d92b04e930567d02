package topology

import (
	"hash/maphash"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// EndpointNodes records, for every topology Service, the nodes its
// endpoints (in its EndpointSlices and v1 Endpoints) were on at its last
// sync, as sorted hashes of their names: a change of another node's labels
// re-filters only the Services with an endpoint there (a hash collision
// only re-filters one more Service, which changes nothing). One short list
// per topology Service costs far less than an index by node on the
// upstream caches (a set of object keys per node, every object under each
// of its endpoints' nodes). It is exact for what has been synced; an object
// changed since has its Service's sync queued, and that sync reads the
// labels then current.
type EndpointNodes map[string][]uint32

var nodeHashSeed = maphash.MakeSeed()

func nodeHash(name string) uint32 { return uint32(maphash.String(nodeHashSeed, name)) }

// Record keeps the nodes of key's endpoints, or forgets key when it is not
// a topology Service (filtered false).
func (t EndpointNodes) Record(key string, filtered bool, sls []*discoveryv1.EndpointSlice, ep *corev1.Endpoints) {
	if !filtered {
		delete(t, key)
		return
	}
	var nodes []uint32
	for _, sl := range sls {
		for _, e := range sl.Endpoints {
			if e.NodeName != nil {
				nodes = append(nodes, nodeHash(*e.NodeName))
			}
		}
	}
	if ep != nil {
		for _, ss := range ep.Subsets {
			for _, list := range [][]corev1.EndpointAddress{ss.Addresses, ss.NotReadyAddresses} {
				for _, a := range list {
					if a.NodeName != nil {
						nodes = append(nodes, nodeHash(*a.NodeName))
					}
				}
			}
		}
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	// Re-filters mostly find the same nodes: keep the list held, and hold
	// a new one sized exactly (what was collected here is dropped).
	if held, ok := t[key]; !ok || !slices.Equal(held, nodes) {
		t[key] = slices.Clone(nodes)
	}
}

// On returns the topology Services with an endpoint on node.
func (t EndpointNodes) On(node string) []string {
	var keys []string
	h := nodeHash(node)
	for k, nodes := range t {
		if _, found := slices.BinarySearch(nodes, h); found {
			keys = append(keys, k)
		}
	}
	return keys
}
