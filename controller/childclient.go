package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

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

// childClient writes one child kind (C, applied as A) as the controller's
// field manager: the same for every kind but for the typed client and an
// empty object to create from.
type childClient[C, A any] struct {
	api    func(namespace string) childAPI[C, A]
	newObj func() C
}

func newChildClient[C, A any, I childAPI[C, A]](api func(namespace string) I, newObj func() C) childClient[C, A] {
	return childClient[C, A]{api: func(ns string) childAPI[C, A] { return api(ns) }, newObj: newObj}
}

// apply server-side applies cfg, forcing conflicts: the controller owns
// what it sets.
func (c childClient[C, A]) apply(ctx context.Context, ns string, cfg A) (C, error) {
	return c.api(ns).Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
}

func (c childClient[C, A]) patch(ctx context.Context, ns, name string, pt types.PatchType, data []byte) (C, error) {
	return c.api(ns).Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: FieldManager})
}

// getLive reads a child from the apiserver (full managedFields).
func (c childClient[C, A]) getLive(ctx context.Context, ns, name string) (C, error) {
	return c.api(ns).Get(ctx, name, metav1.GetOptions{})
}

// create makes a new child from cfg; it fails if the name is taken.
func (c childClient[C, A]) create(ctx context.Context, ns string, cfg A) (C, error) {
	obj := c.newObj()
	if err := fromTemplate(cfg, obj); err != nil {
		var zero C
		return zero, err
	}
	return c.api(ns).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
}

func (c childClient[C, A]) remove(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	return c.api(ns).Delete(ctx, name, opts)
}
