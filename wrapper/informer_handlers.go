package wrapper

import (
	"maps"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper/internal/latencystages"
)

// serviceHandler re-filters the Service of a changed Service or Endpoints.
func (s *Syncer) serviceHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		latencystages.Stamp(unwrap(obj), "handler")
		if o, err := meta.Accessor(unwrap(obj)); err == nil {
			s.refilter(syncKey{namespace: o.GetNamespace(), name: o.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

func (s *Syncer) sliceHandler() cache.ResourceEventHandler {
	groups := func(objs ...any) []syncKey {
		var keys []syncKey
		for _, obj := range objs {
			if sl, ok := unwrap(obj).(*discoveryv1.EndpointSlice); ok && !slices.Contains(keys, sliceGroup(sl)) {
				keys = append(keys, sliceGroup(sl))
			}
		}
		return keys
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.refilter(groups(obj)...) },
		// A slice that moved: its old group first, as the queue would.
		UpdateFunc: func(old, obj any) { s.refilter(groups(old, obj)...) },
		DeleteFunc: func(obj any) { s.refilter(groups(obj)...) },
	}
}

func (s *Syncer) nodeHandler() cache.ResourceEventHandler {
	labelsOf := func(obj any) (string, map[string]string) {
		if n, err := meta.Accessor(unwrap(obj)); err == nil {
			return n.GetName(), n.GetLabels()
		}
		return "", nil
	}
	changed := func(name string, old, cur map[string]string, existedBefore, existsNow bool) {
		for _, k := range s.affectedByNode(name, old, cur, existedBefore != existsNow) {
			s.queue.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			name, l := labelsOf(obj)
			changed(name, nil, l, false, true)
		},
		UpdateFunc: func(old, obj any) {
			name, ol := labelsOf(old)
			_, nl := labelsOf(obj)
			changed(name, ol, nl, true, true)
		},
		DeleteFunc: func(obj any) {
			name, l := labelsOf(obj)
			changed(name, l, nil, true, false)
		},
	}
}

// affectedByNode returns the topology Services whose served endpoints may
// change when node name changes labels (or appears, or disappears): all of
// them for this node, else those with an endpoint on that node.
func (s *Syncer) affectedByNode(name string, old, cur map[string]string, appeared bool) []syncKey {
	if !appeared && maps.Equal(old, cur) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := sets.New[string]()
	if name == s.self {
		keys = s.topologyServices.Clone()
	} else {
		keys.Insert(s.topologyNodes.On(name)...)
	}
	out := make([]syncKey, 0, len(keys))
	for k := range keys {
		ns, n, _ := cache.SplitMetaNamespaceKey(k)
		out = append(out, syncKey{namespace: ns, name: n})
	}
	return out
}
