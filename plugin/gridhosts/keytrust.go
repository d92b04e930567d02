package gridhosts

import (
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/topology"
)

// keyTrust drops, with require_node_restricted_keys, the topology and grid
// keys a compromised node could set on its own Node to join another
// nodeunit: such a key never matches, so a headless Service keyed only on
// them gets no endpoints (NODATA: the wrapper's outcome, never the next
// plugin's every endpoint), a member name of a grid on one is not ours (as on
// a node without the grid's key), and a Service with a further key or "*"
// follows that. Each Service or grid and its keys are logged once.
type keyTrust struct {
	logged sync.Map // "service ns/name" or "grid ns/name" -> fmt of forgeable keys
}

// serviceKeys returns keys without the forgeable ones; empty when none is
// left.
func (k *keyTrust) serviceKeys(ns, name string, keys []string) []string {
	kept, forgeable := topology.NodeRestrictedKeys(keys)
	if forgeable != nil {
		k.report("service", ns, name, forgeable)
	}
	return kept
}

// gridKey reports whether a grid's key may select this node's member.
func (k *keyTrust) gridKey(ns, name, key string) bool {
	if topology.IsNodeRestrictedKey(key) {
		return true
	}
	k.report("grid", ns, name, []string{key})
	return false
}

func (k *keyTrust) report(kind, ns, name string, forgeable []string) {
	id, keys := kind+" "+ns+"/"+name, fmt.Sprint(forgeable)
	if old, loaded := k.logged.Swap(id, keys); loaded && old == keys {
		return
	}
	forgeableKeysIgnored.Inc()
	klog.Warningf("%s: ignoring keys %v of %s %s/%s: a node can set them on its own Node (only keys under %s/ are trusted, require_node_restricted_keys)",
		pluginName, forgeable, kind, ns, name, topology.NodeRestrictionDomain)
}
