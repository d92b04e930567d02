package wrapper

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/nodelabels"
)

// DefaultNodeLabelRecheckInterval is how often a wrapper watching Nodes
// looks whether summaries have appeared.
const DefaultNodeLabelRecheckInterval = nodelabels.DefaultRecheck

// nodeLabels keeps store (node name -> *metav1.PartialObjectMetadata with
// name and labels) from the NodeLabelSummaries when the controller writes
// them, else from every Node's metadata, and tells handler every change.
type nodeLabels struct {
	*nodelabels.Source
	store   cache.Indexer
	handler cache.ResourceEventHandler
}

func newNodeLabels(meta metadata.Interface, grids versioned.Interface, handler cache.ResourceEventHandler) *nodeLabels {
	n := &nodeLabels{store: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), handler: handler}
	n.Source = nodelabels.New(grids, meta, nodelabels.Nodes{
		NewInformer: func() cache.SharedIndexInformer {
			inf := metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource("nodes"), "", 0, cache.Indexers{}, nil).Informer()
			_ = inf.SetTransform(slimNodeMeta) // cannot fail: the informer has not started
			return inf
		},
		Labels: func(obj any) (string, map[string]string, bool) {
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				return "", nil, false
			}
			return m.Name, m.Labels, true
		},
	}, storeSink{n})
	return n
}

// storeSink keeps store and tells the handler. The Source calls it one
// change at a time, only when a node's labels changed.
type storeSink struct{ n *nodeLabels }

func (s storeSink) Set(name string, labels map[string]string, node any) {
	m, ok := node.(*metav1.PartialObjectMetadata)
	if !ok {
		m = &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		}
	}
	old, exists, _ := s.n.store.GetByKey(name)
	if !exists {
		_ = s.n.store.Add(m)
		s.n.handler.OnAdd(m, false)
		return
	}
	_ = s.n.store.Update(m)
	s.n.handler.OnUpdate(old, m)
}

func (s storeSink) Delete(name string) {
	old, exists, _ := s.n.store.GetByKey(name)
	if !exists {
		return
	}
	_ = s.n.store.Delete(old)
	s.n.handler.OnDelete(old)
}
