package controller

import (
	"k8s.io/client-go/tools/cache"
)

// enqueueKey adds the grid named by key "namespace/name".
func (c *gridController[G, C, A]) enqueueKey(key string) {
	name, err := cache.ParseObjectName(key)
	if err != nil {
		return
	}
	c.queue.Add(name)
}

func (c *gridController[G, C, A]) enqueueGrid(obj any) {
	if m, ok := objectOf(obj); ok {
		c.queue.Add(cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()})
	}
}

// gridHandlers enqueue a grid on every notification, resyncs included: a
// resync is the periodic re-check of the whole grid.
func (c *gridController[G, C, A]) gridHandlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueGrid,
		UpdateFunc: func(_, obj any) { c.enqueueGrid(obj) },
		DeleteFunc: c.enqueueGrid,
	}
}

// childHandlers enqueue the grids a child belongs to (its controller and the
// grid its label names) when the child really changed.
func (c *gridController[G, C, A]) childHandlers() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if m, ok := objectOf(obj); ok {
			c.created.seen(m.GetUID())
			for _, k := range gridKeysOf(m, c.kind) {
				c.enqueueKey(k)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur any) {
			o, ok1 := objectOf(old)
			n, ok2 := objectOf(cur)
			if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
				return
			}
			enqueue(old)
			enqueue(cur)
		},
		DeleteFunc: func(obj any) {
			if m, ok := objectOf(obj); ok {
				c.verified.forget(m.GetUID())
			}
			enqueue(obj)
		},
	}
}

// nodeHandlers enqueue the grids whose gridUniqKey gained or lost a value
// (a nodeunit appeared or went); status heartbeats never reach here (the
// transform drops status), and a Node relabelled into or out of a nodeunit
// that keeps other Nodes enqueues nothing (nodeunitcounts.go).
func (c *gridController[G, C, A]) nodeHandlers(grids cache.Indexer) cache.ResourceEventHandler {
	counts := &nodeUnitCounts{}
	enqueueFor := func(keys []string) {
		for _, k := range keys {
			objs, err := grids.ByIndex(gridUniqKeyIndex, k)
			if err != nil {
				continue
			}
			for _, o := range objs {
				c.enqueueGrid(o)
			}
		}
	}
	labelsOf := func(obj any) (map[string]string, bool) {
		m, ok := objectOf(obj)
		if !ok {
			return nil, false
		}
		return m.GetLabels(), true
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if l, ok := labelsOf(obj); ok {
				enqueueFor(counts.change(nil, l))
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := labelsOf(old)
			n, ok2 := labelsOf(cur)
			if !ok1 || !ok2 {
				return
			}
			enqueueFor(counts.change(o, n))
		},
		DeleteFunc: func(obj any) {
			if l, ok := labelsOf(obj); ok {
				enqueueFor(counts.change(l, nil))
			}
		},
	}
}
