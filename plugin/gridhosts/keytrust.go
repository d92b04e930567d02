package gridhosts

import (
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/topology"
)

// keyTrust is require_node_restricted_keys' part in the handler: the
// topology and grid keys a compromised node could set on its own Node to
// join another nodeunit never match. A headless Service's keys are dropped
// by the index (index.Headless): one keyed only on them gets no endpoints
// (NODATA: the wrapper's outcome, never the next plugin's every endpoint),
// and one with a further key or "*" follows that. A member name of a grid on
// one is not ours (as on a node without the grid's key). Each Service or
// grid and its keys are logged once.
type keyTrust struct {
	logged sync.Map // "service ns/name" or "grid ns/name" -> fmt of forgeable keys
}

// serviceKeys reports a Service's forgeable keys, which the index dropped
// (index.Headless with restrict).
func (k *keyTrust) serviceKeys(ns, name string, forgeable []string) {
	k.report("service", ns, name, forgeable)
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
