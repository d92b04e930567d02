package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ensure makes the child match the grid unless it already does: a missing
// child is created (a create fails instead of taking over an object someone
// made meanwhile), an existing one gets its field ownership migrated once
// and is applied with its UID (the apply fails if the name now holds a
// different object).
func (c *gridController[G, C, A]) ensure(ctx context.Context, grid G, u unit, live C, hasLive bool) (C, error) {
	var zero C
	controlled := hasLive && metav1.IsControlledBy(live, grid)
	if controlled {
		if h, ok := c.hashes.get(grid, u); ok && c.unchanged(live, h) {
			return live, nil
		}
	}
	cfg, err := c.grids.desired(grid, u)
	if err != nil {
		return zero, err
	}
	logger := klog.FromContext(ctx)
	if !hasLive {
		obj, err := c.store.create(ctx, grid.GetNamespace(), cfg)
		if err != nil {
			return zero, err
		}
		countChildWrite(c.kind)
		c.created.remember(cache.MetaObjectToName(grid), obj, time.Now())
		logger.V(2).Info("Created child", "child", klog.KObj(obj), "nodeunit", u.value)
		return obj, nil
	}
	if controlled {
		want, err := toJSONMap(cfg)
		if err != nil {
			return zero, err
		}
		wantHash := nestedString(want, "metadata", "annotations", AnnotationAppliedHash)
		c.hashes.put(grid, u, wantHash)
		if c.unchanged(live, wantHash) {
			return live, nil
		}
		if ext, err := c.store.config(live); err == nil {
			if same, err := upToDate(live, want, ext); err == nil && same {
				c.verified.remember(live.GetUID(), live.GetResourceVersion(), wantHash)
				return live, nil
			}
		}
	}
	if ownedByUpdate(live) {
		if err := c.migrateOwnership(ctx, live); err != nil {
			return zero, err
		}
	}
	obj, err := c.store.apply(ctx, grid.GetNamespace(), live.GetUID(), cfg)
	if ic, ok := asImmutableChange(err); ok {
		if !ic.selector && selectorChanged(live, cfg) {
			ic.selector = true
			ic.fields = append(ic.fields, "spec.selector")
		}
		if c.recreatable && !ic.selector && metav1.IsControlledBy(live, grid) {
			return zero, c.recreate(ctx, grid, live, ic)
		}
		return zero, ic
	}
	if err != nil {
		return zero, err
	}
	countChildWrite(c.kind)
	c.applied.remember(live, obj)
	logger.V(2).Info("Applied child", "child", klog.KObj(obj), "nodeunit", u.value)
	return obj, nil
}

// unchanged: the controlled child needs no write for a desired child of
// applied-hash wantHash: it was just applied and the cache has not caught up
// (its update event follows), or this version of it was found up to date.
func (c *gridController[G, C, A]) unchanged(live C, wantHash string) bool {
	have := c.applied.hashOf(live)
	if have == wantHash && live.GetAnnotations()[AnnotationAppliedHash] != have {
		return true
	}
	return c.verified.upToDate(live.GetUID(), live.GetResourceVersion(), wantHash)
}

// errRecreating: the child was deleted (orphaning its pods) to be created
// anew with a field that cannot change in place.
var errRecreating = errors.New("re-creating")

// recreate deletes a child whose wanted spec changes immutable fields,
// orphaning its pods; the next sync creates it anew and the workload
// controller adopts the pods (same selector), so none restarts unless the
// pod template changed too.
func (c *gridController[G, C, A]) recreate(ctx context.Context, grid G, live C, ic immutableChange) error {
	uid := live.GetUID()
	orphan := metav1.DeletePropagationOrphan
	err := c.store.remove(ctx, live.GetNamespace(), live.GetName(), metav1.DeleteOptions{PropagationPolicy: &orphan, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s to re-create it: %w", c.childKind, live.GetName(), err)
	}
	klog.FromContext(ctx).Info("Re-creating child for fields that cannot change in place", "child", klog.KObj(live), "fields", ic.fields)
	c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonRecreating, "Re-creating %s %s: %v; its pods are kept and adopted by the new one",
		c.childKind, live.GetName(), ic)
	return errRecreating
}
