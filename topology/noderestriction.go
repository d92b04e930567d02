package topology

import "strings"

// NodeRestrictionDomain is the label prefix the NodeRestriction admission
// plugin forbids kubelets to set on their own Node (as
// node-restriction.kubernetes.io/ or a subdomain of it): only an identity
// that may update Nodes through RBAC, an administrator, can.
const NodeRestrictionDomain = "node-restriction.kubernetes.io"

// IsNodeRestrictedKey reports whether a node label key is one a kubelet
// cannot set on its own Node under NodeRestriction. Any other key (zone1,
// topology.kubernetes.io/zone) a compromised node can set to join another
// nodeunit's routing.
func IsNodeRestrictedKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == NodeRestrictionDomain || strings.HasSuffix(prefix, "."+NodeRestrictionDomain))
}

// NodeRestrictedKeys returns keys without those a node could set on itself,
// so such a key never qualifies and the rule falls to the next key (or "*",
// which is kept); forgeable lists the keys dropped. keys is not modified.
func NodeRestrictedKeys(keys []string) (kept, forgeable []string) {
	for _, k := range keys {
		if k == AnyKey || IsNodeRestrictedKey(k) {
			kept = append(kept, k)
		} else {
			forgeable = append(forgeable, k)
		}
	}
	if forgeable == nil {
		return keys, nil
	}
	return kept, forgeable
}
