package controller

import (
	"fmt"
	"strings"
)

// NodeRestrictionDomain is the label prefix the NodeRestriction admission
// plugin forbids kubelets to set on their own Node (as
// node-restriction.kubernetes.io/ or a subdomain of it): only an identity
// that may update Nodes through RBAC, an administrator, can.
const NodeRestrictionDomain = "node-restriction.kubernetes.io"

// IsNodeRestrictedKey reports whether a node label key is one a kubelet
// cannot set on its own Node under NodeRestriction.
func IsNodeRestrictedKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == NodeRestrictionDomain || strings.HasSuffix(prefix, "."+NodeRestrictionDomain))
}

// untrustedGridKey says why key may not be a grid key when only keys a
// compromised node cannot set on itself are accepted; nil when it may.
// Any other key (zone1, topology.kubernetes.io/zone) is one NodeRestriction
// lets a kubelet set on its own Node: a compromised node could join any
// nodeunit, get that nodeunit's copy of every grid (its Secrets and
// ConfigMaps mounted) and its traffic.
func untrustedGridKey(key string) error {
	if IsNodeRestrictedKey(key) {
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
