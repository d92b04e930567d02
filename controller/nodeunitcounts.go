package controller

import "sync"

// nodeUnitCounts counts, per label key and non-empty value, the Nodes a
// node handler has been told carry it. A grid's nodeunits are the values of
// its key with a count above zero, so only a value appearing or
// disappearing changes what a sync of the key's grids does: a Node moving
// between two existing nodeunits, or joining one, changes nothing for them
// (the sync reads nothing else from Nodes; a canary selector matches
// {key: value} alone). Counting in the handler, not asking the indexer,
// because the indexer runs ahead of the notifications: asked during a
// burst of moves it would show their end state at every one of them.
type nodeUnitCounts struct {
	mu sync.Mutex
	n  map[string]map[string]int // key -> value -> Nodes
}

// change accounts for a Node going from labels old to cur (nil: absent)
// and returns the keys whose set of values changed.
func (c *nodeUnitCounts) change(old, cur map[string]string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]map[string]int{}
	}
	var keys []string
	for _, k := range changedLabelKeys(old, cur) {
		changed := false
		if v := old[k]; v != "" {
			changed = c.add(k, v, -1) || changed
		}
		if v := cur[k]; v != "" {
			changed = c.add(k, v, 1) || changed
		}
		if changed {
			keys = append(keys, k)
		}
	}
	return keys
}

// add moves the count of key=value by delta and reports whether the value
// appeared or disappeared.
func (c *nodeUnitCounts) add(key, value string, delta int) bool {
	values := c.n[key]
	if values == nil {
		values = map[string]int{}
		c.n[key] = values
	}
	before := values[value]
	after := max(before+delta, 0)
	if after == 0 {
		delete(values, value)
		if len(values) == 0 {
			delete(c.n, key)
		}
	} else {
		values[value] = after
	}
	return (before == 0) != (after == 0)
}
