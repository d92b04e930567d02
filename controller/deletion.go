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

// removeVanished deletes the children of nodeunits that have had no nodes
// for the grace period; younger ones are returned with their pending
// deletion (for the status) and the grid is re-queued for their deadline.
// Only controlled children are ever deleted, with a UID precondition.
func (c *gridController[G, C, A]) removeVanished(ctx context.Context, grid G, controlled map[string]C, wanted map[string]bool) ([]child[C], error) {
	key := cache.ObjectName{Namespace: grid.GetNamespace(), Name: grid.GetName()}
	var pending []child[C]
	var errs []error
	for name, ch := range controlled {
		value := c.valueOf(grid, name)
		if wanted[name] {
			if c.grace.clear(ch.GetUID()) {
				c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonDeletionCancelled,
					"Nodeunit %q has nodes again: %s %s stays", value, c.childKind, name)
			}
			continue
		}
		deadline, first := c.grace.mark(key, ch.GetUID())
		if now := c.grace.clock.Now(); now.Before(deadline) {
			at := deadline.UTC().Format(time.RFC3339)
			if first {
				c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonDeletionPending,
					"Nodeunit %q has no nodes: %s %s will be deleted at %s unless nodes come back", value, c.childKind, name, at)
			}
			c.queue.AddAfter(key, deadline.Sub(now))
			pending = append(pending, child[C]{unit: unit{value: value, name: name}, obj: ch,
				pending: fmt.Sprintf("delete at %s: nodeunit has no nodes", at)})
			continue
		}
		uid := ch.GetUID()
		err := c.store.remove(ctx, ch.GetNamespace(), name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", c.childKind, name, err))
			continue
		}
		c.grace.clear(uid)
		klog.FromContext(ctx).V(2).Info("Deleted child of a vanished nodeunit", "child", klog.KObj(ch))
		c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonDeleted, "Deleted %s %s: its nodeunit has had no nodes for %s", c.childKind, name, c.grace.period)
	}
	return pending, errors.Join(errs...)
}
