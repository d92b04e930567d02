package informers

import (
	"maps"
	"slices"

	"github.com/servicegroup/servicegroup/internal/nodelabels"
)

// What the watches hold, by cache key and sorted: for tests and diagnostics,
// each read under the lock of what it reads.

// SelectedPods are the pods the current pod selection holds (node mode): its
// own until it is live, then the index's, which are exactly its pods.
func (w *Watcher) SelectedPods() []string {
	if w.podSelection == nil {
		return nil
	}
	p := w.podSelection
	p.mu.Lock()
	cur := p.cur
	p.mu.Unlock()
	if cur == nil {
		return nil
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	keys := slices.Collect(maps.Keys(cur.pods))
	if cur.phase == live {
		keys = nil
		for _, o := range cur.idx.Contents().Pods {
			keys = append(keys, o.Key())
		}
	}
	slices.Sort(keys)
	return keys
}

// LabelledChildren are the grid StatefulSets the live watch of this node's
// nodeunits' labelled children holds (node mode).
func (w *Watcher) LabelledChildren() []string {
	if w.podSelection == nil {
		return nil
	}
	p := w.podSelection
	p.mu.Lock()
	cur := p.curChildren
	p.mu.Unlock()
	if cur == nil || cur.inf == nil {
		return nil
	}
	keys := cur.inf.GetStore().ListKeys()
	slices.Sort(keys)
	return keys
}

// UnlabelledChildren are the grid StatefulSets the watch of children
// without a nodeunit label holds (node mode); every grid StatefulSet in
// clients mode.
func (w *Watcher) UnlabelledChildren() []string {
	keys := w.sets.Apps().V1().StatefulSets().Informer().GetStore().ListKeys()
	slices.Sort(keys)
	return keys
}

// CachedServices are the Services the two Service informers hold.
func (w *Watcher) CachedServices() []string {
	keys := w.gridServices.Core().V1().Services().Informer().GetStore().ListKeys()
	keys = append(keys, w.headlessServices.Core().V1().Services().Informer().GetStore().ListKeys()...)
	slices.Sort(keys)
	return keys
}

// NodeLabels is node mode's source of nodes' labels (nil in clients mode).
func (w *Watcher) NodeLabels() *nodelabels.Source { return w.nodeLabels }

// Stopped is closed once Stop has ended every informer goroutine.
func (w *Watcher) Stopped() <-chan struct{} { return w.stopped }
