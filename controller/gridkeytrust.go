package controller

import (
	"fmt"
	"strings"

	"github.com/servicegroup/servicegroup/topology"
)

// NodeRestrictionDomain is the label prefix kubelets cannot set on their own
// Node; the rule is package topology's, shared with the wrapper and gridhosts.
const NodeRestrictionDomain = topology.NodeRestrictionDomain

// untrustedGridKey says why key may not be a grid key when only keys a
// compromised node cannot set on itself are accepted; nil when it may.
// Any other key (zone1, topology.kubernetes.io/zone) is one NodeRestriction
// lets a kubelet set on its own Node: a compromised node could join any
// nodeunit, get that nodeunit's copy of every grid (its Secrets and
// ConfigMaps mounted) and its traffic.
func untrustedGridKey(key string) error {
	if topology.IsNodeRestrictedKey(key) {
		return nil
	}
	return fmt.Errorf("spec.gridUniqKey %q can be set by a node's kubelet on its own Node, and only keys under %s/ are accepted (--require-node-restricted-grid-keys): label nodes with e.g. %s/%s and key the grid on that",
		key, NodeRestrictionDomain, NodeRestrictionDomain, lastSegment(key))
}

func lastSegment(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[i+1:]
	}
	return key
}
