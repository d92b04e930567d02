package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// kindAccess is the part of kindOps that differs between the kinds by type
// alone: the grid and its children read from the informers' caches, read
// live and written through the typed clients. newKindAccess builds it from
// the generated listers and clients, so a kind states it in one call.
type kindAccess[G, C object, A any] struct {
	getGrid      func(namespace, name string) (G, error)
	liveGrid     func(ctx context.Context, namespace, name string) (G, error)
	updateStatus func(ctx context.Context, grid G) error

	getChild func(namespace, name string) (C, error)
	// children are the candidates: controlled by or labelled for the grid.
	children func(namespace, grid string) ([]C, error)
	extract  func(C) (A, error)
	// client writes children.
	client childClient[C, A]
	// setUID makes an apply fail unless the object is the one we read.
	setUID func(cfg A, uid types.UID)
}

// namespacedGetter is a generated lister for one namespace.
type namespacedGetter[T any] interface {
	Get(name string) (T, error)
}

// gridAPI is the part of the generated typed client for one grid kind in
// one namespace the controller uses.
type gridAPI[G any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (G, error)
	UpdateStatus(ctx context.Context, grid G, opts metav1.UpdateOptions) (G, error)
}

// uidSetter is an apply configuration (WithUID returns itself).
type uidSetter[A any] interface {
	WithUID(types.UID) A
}

// newKindAccess takes a kind's generated lister and client per namespace
// (grids.Lister().DeploymentGrids, gridClient.DeploymentGrids, ...), its
// child informer, client-go's Extract function for the child kind and a
// constructor of an empty child.
func newKindAccess[G, C object, A uidSetter[A], GL namespacedGetter[G], GI gridAPI[G], CL namespacedGetter[C], CI childAPI[C, A]](
	gridLister func(namespace string) GL, gridClient func(namespace string) GI,
	childInformer cache.SharedIndexInformer, childLister func(namespace string) CL, childClient func(namespace string) CI,
	extract func(C, string) (A, error), newChild func() C,
) kindAccess[G, C, A] {
	return kindAccess[G, C, A]{
		getGrid: func(ns, name string) (G, error) { return gridLister(ns).Get(name) },
		liveGrid: func(ctx context.Context, ns, name string) (G, error) {
			return gridClient(ns).Get(ctx, name, metav1.GetOptions{})
		},
		updateStatus: func(ctx context.Context, grid G) error {
			_, err := gridClient(grid.GetNamespace()).UpdateStatus(ctx, grid, metav1.UpdateOptions{FieldManager: FieldManager})
			return err
		},
		getChild: func(ns, name string) (C, error) { return childLister(ns).Get(name) },
		children: func(ns, grid string) ([]C, error) {
			return byIndex[C](childInformer.GetIndexer(), ns, grid)
		},
		extract: func(obj C) (A, error) { return extract(obj, FieldManager) },
		client:  newChildClient(childClient, newChild),
		setUID:  func(cfg A, uid types.UID) { cfg.WithUID(uid) },
	}
}

// writeStatus builds the grid's status from its children and the
// conditions, and writes it only if it differs.
func (o kindOps[G, C, A]) writeStatus(ctx context.Context, grid G, children []child[C], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) error {
	next, changed := o.status(grid, children, conds, rollout)
	if !changed {
		return nil
	}
	return o.updateStatus(ctx, next)
}
