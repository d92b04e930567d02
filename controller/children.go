package controller

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// gridLabels are the two labels every child carries: for unprefixed keys
// exactly SuperEdge's, for prefixed ones the shared label-value encoding.
func gridLabels(grid, key string) map[string]string {
	return map[string]string{
		superedgev1.LabelGridSelector: grid,
		superedgev1.LabelGridUniqKey:  superedgev1.GridUniqKeyLabelValue(key),
	}
}

// gridAnnotations carry the key verbatim (a label value cannot hold a prefixed key).
func gridAnnotations(key string) map[string]string {
	return map[string]string{superedgev1.AnnotationGridUniqKey: key}
}

// carriesGridKey: obj's grid-key label or annotation names key, as written
// by this controller or by SuperEdge's.
func carriesGridKey(obj metav1.Object, key string) bool {
	k, ok := superedgev1.GridUniqKeyOf(obj.GetLabels(), obj.GetAnnotations())
	return ok && (k == key || k == superedgev1.GridUniqKeyLabelValue(key))
}

// ownerReference makes grid the child's controller, so that deleting the grid
// garbage-collects the child.
func ownerReference(grid object, kind string) *metav1apply.OwnerReferenceApplyConfiguration {
	return metav1apply.OwnerReference().
		WithAPIVersion(superedgev1.SchemeGroupVersion.String()).
		WithKind(kind).
		WithName(grid.GetName()).
		WithUID(grid.GetUID()).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// stampHash adds AnnotationAppliedHash, the digest of cfg without it.
func stampHash[A any](cfg A, withAnnotations func(map[string]string) A) (A, error) {
	h, err := hashOf(cfg)
	if err != nil {
		var zero A
		return zero, err
	}
	return withAnnotations(map[string]string{AnnotationAppliedHash: h}), nil
}

// workloadUnits: one child per nodeunit value, named {grid}-{value}, built
// from the template SuperEdge's rule picks for the value.
func workloadUnits(grid string, values []string, templates map[string]string, defaultName string) []unit {
	out := make([]unit, len(values))
	for i, v := range values {
		out[i] = unit{value: v, name: childName(grid, v), template: templateName(templates, defaultName, v)}
	}
	return out
}

// byIndex lists the cached children indexed under namespace/grid. The
// returned objects belong to the cache: never modify them.
func byIndex[C any](indexer cache.Indexer, namespace, grid string) ([]C, error) {
	objs, err := indexer.ByIndex(gridIndex, namespace+"/"+grid)
	if err != nil {
		return nil, err
	}
	out := make([]C, 0, len(objs))
	for _, o := range objs {
		if c, ok := o.(C); ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// wireIndexes adds the indexes a grid kind needs to its informers.
func wireIndexes[G any](grids, children, nodes cache.SharedIndexInformer, kind string, key func(G) string) error {
	if err := addIndexer(grids, gridUniqKeyIndex, func(obj any) ([]string, error) {
		if g, ok := obj.(G); ok && key(g) != "" {
			return []string{key(g)}, nil
		}
		return nil, nil
	}); err != nil {
		return err
	}
	if err := addIndexer(children, gridIndex, childGridIndexFunc(kind)); err != nil {
		return err
	}
	if nodes != nil {
		return addIndexer(nodes, nodeLabelKeyIndex, indexNodeLabelKeys)
	}
	return nil
}

// register subscribes the controller to its informers.
func register[G, C object, A childConfig[A]](c *gridController[G, C, A], grids, children, nodes cache.SharedIndexInformer) error {
	regs := []cache.ResourceEventHandlerRegistration{}
	r, err := grids.AddEventHandler(c.gridHandlers())
	if err != nil {
		return err
	}
	regs = append(regs, r)
	if r, err = children.AddEventHandler(c.childHandlers()); err != nil {
		return err
	}
	regs = append(regs, r)
	if nodes != nil {
		if r, err = nodes.AddEventHandler(c.nodeHandlers(grids.GetIndexer())); err != nil {
			return err
		}
		regs = append(regs, r)
	}
	for _, r := range regs {
		c.synced = append(c.synced, r.HasSynced)
	}
	return nil
}

// statusEqual compares statuses semantically (times, quantities).
func statusEqual(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }
