package informers

import (
	"fmt"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/nodelabels"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// newNodeLabelSource feeds idx every node's labels in node mode, where only
// labels matter (InternalIPs place clients, which node mode does not do):
// from the NodeLabelSummaries when upstream has any, else from every Node
// (informer slimmed to name and labels).
func newNodeLabelSource(cfg *rest.Config, kube kubernetes.Interface, grids versioned.Interface, sink indexSink) (*nodelabels.Source, error) {
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	return nodelabels.New(grids, meta, nodelabels.Nodes{
		NewInformer: func() cache.SharedIndexInformer {
			inf := coreinformers.NewNodeInformer(kube, 0, cache.Indexers{})
			_ = inf.SetTransform(index.SlimNode) // cannot fail: the informer has not started
			return inf
		},
		Labels: func(obj any) (string, map[string]string, bool) {
			o, ok := obj.(*index.NodeObj)
			if !ok {
				return "", nil, false
			}
			return o.Name, o.Labels, true
		},
	}, sink), nil
}

// indexSink puts nodes' labels in the Index; this node's (self) go to the
// pod selection, which applies them once the pods they select are there.
type indexSink struct {
	idx  *index.Index
	self string
	sel  *podSelection
}

func (s indexSink) Set(name string, labels map[string]string, node any) {
	o, ok := node.(*index.NodeObj)
	if !ok {
		o = index.NodeLabels(name, labels)
	}
	if s.sel != nil && name == s.self {
		s.sel.setSelf(&selfChange{node: o})
		return
	}
	s.idx.Upsert(o)
}

func (s indexSink) Delete(name string) {
	o := index.NodeLabels(name, nil)
	if s.sel != nil && name == s.self {
		s.sel.setSelf(&selfChange{node: o, deleted: true})
		return
	}
	s.idx.Delete(o)
}
