package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"
)

// kindStore reads and writes one grid kind (G) and its child kind (C,
// applied as A): cached reads from the informers, live reads and every
// write through the typed clients, as the controller's field manager.
type kindStore[G, C object, A childConfig[A]] struct {
	grids       listers.ResourceIndexer[G]
	gridClient  func(namespace string) gridAPI[G]
	children    listers.ResourceIndexer[C]
	childIndex  cache.Indexer
	childClient func(namespace string) childAPI[C, A]
	// extract is client-go's Extract function of the child kind.
	extract func(obj C, fieldManager string) (A, error)
	// newChild is an empty child to create from.
	newChild func() C
}

// gridAPI is the part of the generated typed client for one grid kind in
// one namespace the controller uses.
type gridAPI[G any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (G, error)
	UpdateStatus(ctx context.Context, grid G, opts metav1.UpdateOptions) (G, error)
}

// childAPI is the part of client-go's typed client for one child kind in
// one namespace (DeploymentInterface, StatefulSetInterface,
// ServiceInterface) the controller writes with.
type childAPI[C, A any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (C, error)
	Create(ctx context.Context, obj C, opts metav1.CreateOptions) (C, error)
	Apply(ctx context.Context, cfg A, opts metav1.ApplyOptions) (C, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (C, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// newKindStore builds a kind's store from its informers, the resources
// its generated listers name in NotFound errors, its typed clients,
// client-go's Extract function of the child kind and an empty child.
func newKindStore[G, C object, A childConfig[A]](
	grids cache.SharedIndexInformer, gridResource schema.GroupResource, gridClient func(namespace string) gridAPI[G],
	children cache.SharedIndexInformer, childResource schema.GroupResource, childClient func(namespace string) childAPI[C, A],
	extract func(obj C, fieldManager string) (A, error), newChild func() C,
) kindStore[G, C, A] {
	return kindStore[G, C, A]{
		grids:       listers.New[G](grids.GetIndexer(), gridResource),
		gridClient:  gridClient,
		children:    listers.New[C](children.GetIndexer(), childResource),
		childIndex:  children.GetIndexer(),
		childClient: childClient,
		extract:     extract,
		newChild:    newChild,
	}
}

// grid reads a grid from the cache.
func (s kindStore[G, C, A]) grid(namespace, name string) (G, error) {
	return listers.NewNamespaced(s.grids, namespace).Get(name)
}

// liveGrid reads a grid from the apiserver.
func (s kindStore[G, C, A]) liveGrid(ctx context.Context, namespace, name string) (G, error) {
	return s.gridClient(namespace).Get(ctx, name, metav1.GetOptions{})
}

// updateStatus writes a grid's status, conditional on its resourceVersion,
// and returns the grid as written.
func (s kindStore[G, C, A]) updateStatus(ctx context.Context, grid G) (G, error) {
	return s.gridClient(grid.GetNamespace()).UpdateStatus(ctx, grid, metav1.UpdateOptions{FieldManager: FieldManager})
}

// child reads a child from the cache.
func (s kindStore[G, C, A]) child(namespace, name string) (C, error) {
	return listers.NewNamespaced(s.children, namespace).Get(name)
}

// candidates are the cached children controlled by or labelled for the
// grid. They belong to the cache: never modify them.
func (s kindStore[G, C, A]) candidates(namespace, grid string) ([]C, error) {
	return byIndex[C](s.childIndex, namespace, grid)
}

// config is the configuration our field manager applied to a child.
func (s kindStore[G, C, A]) config(obj C) (A, error) { return s.extract(obj, FieldManager) }

// liveChild reads a child from the apiserver (full managedFields).
func (s kindStore[G, C, A]) liveChild(ctx context.Context, namespace, name string) (C, error) {
	return s.childClient(namespace).Get(ctx, name, metav1.GetOptions{})
}

// create makes a new child from cfg; it fails if the name is taken.
func (s kindStore[G, C, A]) create(ctx context.Context, namespace string, cfg A) (C, error) {
	obj := s.newChild()
	if err := fromTemplate(cfg, obj); err != nil {
		var zero C
		return zero, err
	}
	return s.childClient(namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
}

// apply server-side applies cfg to the child with uid, forcing conflicts
// (the controller owns what it sets); it fails if the name now holds
// another object.
func (s kindStore[G, C, A]) apply(ctx context.Context, namespace string, uid types.UID, cfg A) (C, error) {
	cfg.WithUID(uid)
	return s.childClient(namespace).Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
}

func (s kindStore[G, C, A]) patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (C, error) {
	return s.childClient(namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: FieldManager})
}

func (s kindStore[G, C, A]) remove(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return s.childClient(namespace).Delete(ctx, name, opts)
}
