package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// Index names on the informers the controllers share.
const (
	// gridIndex maps a child to "namespace/grid" of the grid that controls it
	// and of the grid its grid-selector label names.
	gridIndex = "grid"
	// gridUniqKeyIndex maps a grid to its spec.gridUniqKey.
	gridUniqKeyIndex = "gridUniqKey"
)

// Transform keeps cached objects small. Nodes shrink to name and labels.
// Other objects keep only our own managedFields entries: the extracted apply
// configuration needs them, nobody else's are read.
func Transform(obj any) (any, error) {
	if node, ok := obj.(*corev1.Node); ok {
		return stripNode(node), nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil //nolint:nilerr // tombstones and other non-objects pass unchanged
	}
	mf := m.GetManagedFields()
	if len(mf) == 0 {
		return obj, nil
	}
	var ours []metav1.ManagedFieldsEntry
	var update *metav1.ManagedFieldsEntry
	hasApply := false
	for i, e := range mf {
		if e.Manager != FieldManager {
			continue
		}
		ours = append(ours, e)
		if e.Subresource == "" {
			switch e.Operation {
			case metav1.ManagedFieldsOperationApply:
				hasApply = true
			case metav1.ManagedFieldsOperationUpdate:
				update = &mf[i]
			}
		}
	}
	// A child made with Create (ours, or SuperEdge's) has only an Update
	// entry. Its fields are what the controller set, so the cached copy
	// also shows them as an Apply entry: the "already up to date" check
	// then needs no write for it. The real entry is migrated before the
	// next apply (adoption.go).
	if !hasApply && update != nil {
		synth := *update
		synth.Operation = metav1.ManagedFieldsOperationApply
		ours = append(ours, synth)
	}
	m.SetManagedFields(ours)
	return obj, nil
}

// TransformGrids drops all managedFields from grids: the controller never
// applies to them.
func TransformGrids(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// childGridIndexFunc indexes children of gridKind by the grids that control
// or select them, so a grid finds its children (and orphans to adopt) fast.
func childGridIndexFunc(gridKind string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil //nolint:nilerr // not an object: not indexed
		}
		return gridKeysOf(m, gridKind), nil
	}
}

// gridKeysOf names the grids ("namespace/name") a child belongs to or asks for.
func gridKeysOf(m metav1.Object, gridKind string) []string {
	var keys []string
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil && ref.Kind == gridKind && refGroup(ref) == superedgev1.SchemeGroupVersion.Group {
		keys = append(keys, m.GetNamespace()+"/"+ref.Name)
	}
	if sel := m.GetLabels()[superedgev1.LabelGridSelector]; sel != "" {
		k := m.GetNamespace() + "/" + sel
		if len(keys) == 0 || keys[0] != k {
			keys = append(keys, k)
		}
	}
	return keys
}

func refGroup(ref *metav1.OwnerReference) string {
	for i := 0; i < len(ref.APIVersion); i++ {
		if ref.APIVersion[i] == '/' {
			return ref.APIVersion[:i]
		}
	}
	return ""
}

// addIndexer adds an index unless an identical name is already there (the
// node informer is shared by two controllers).
func addIndexer(inf cache.SharedIndexInformer, name string, fn cache.IndexFunc) error {
	if _, ok := inf.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{name: fn}); err != nil {
		return fmt.Errorf("add index %s: %w", name, err)
	}
	return nil
}

// objectOf unwraps a tombstone from a delete notification.
func objectOf(obj any) (metav1.Object, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, err := meta.Accessor(obj)
	return m, err == nil
}
