package wrapper

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// selfNodeHandler serves this node from its own (full) informer, whose
// labels are this node's labels for topology: a relabel re-filters every
// topology Service.
func (s *Syncer) selfNodeHandler() cache.ResourceEventHandler {
	relabel := s.nodeHandler()
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Set(n.Name, shareTop(n))
				relabel.OnAdd(obj, false)
			}
		},
		UpdateFunc: func(old, obj any) {
			if n, ok := obj.(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Set(n.Name, shareTop(n))
				relabel.OnUpdate(old, obj)
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := unwrap(obj).(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Delete(n.Name)
				relabel.OnDelete(obj)
			}
		},
	}
}
