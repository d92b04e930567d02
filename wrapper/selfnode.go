package wrapper

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// selfNodeHandler serves this node from its own (full) informer.
func (s *Syncer) selfNodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Set(n.Name, shareTop(n))
			}
		},
		UpdateFunc: func(_, obj any) {
			if n, ok := obj.(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Set(n.Name, shareTop(n))
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := unwrap(obj).(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Delete(n.Name)
			}
		},
	}
}
