package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// adoptable: an orphan carrying this grid's selector label and key, as this
// controller or SuperEdge's labels its children. Anything else with a
// child's name is foreign and never modified.
func (c *gridController[G, C, A]) adoptable(grid G, gridKey string, obj C) bool {
	if metav1.GetControllerOfNoCopy(obj) != nil || obj.GetDeletionTimestamp() != nil {
		return false
	}
	return obj.GetLabels()[superedgev1.LabelGridSelector] == grid.GetName() && carriesGridKey(obj, gridKey)
}

// recheck confirms with a live read that the grid still exists and is not
// being deleted before adopting anything (the cache may be stale).
func (c *gridController[G, C, A]) recheck(ctx context.Context, grid G) error {
	fresh, err := c.store.liveGrid(ctx, grid.GetNamespace(), grid.GetName())
	if err != nil {
		return err
	}
	if fresh.GetUID() != grid.GetUID() {
		return fmt.Errorf("%s %s/%s was recreated (uid %s, cached %s)", c.kind, grid.GetNamespace(), grid.GetName(), fresh.GetUID(), grid.GetUID())
	}
	if fresh.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s %s/%s is being deleted", c.kind, grid.GetNamespace(), grid.GetName())
	}
	return nil
}

// release drops our controller reference from a child we no longer select.
func (c *gridController[G, C, A]) release(ctx context.Context, grid G, ch C) error {
	_, err := c.store.patch(ctx, ch.GetNamespace(), ch.GetName(), types.StrategicMergePatchType, releasePatch(grid, ch))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s %s: %w", c.childKind, ch.GetName(), err)
	}
	klog.FromContext(ctx).V(2).Info("Released child whose labels no longer match", "child", klog.KObj(ch))
	c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonReleased, "Released %s %s: its %s label no longer names this grid",
		c.childKind, ch.GetName(), superedgev1.LabelGridSelector)
	return nil
}

// ownedByUpdate: fields of obj are owned by an Update (not Apply) entry of
// our manager name. SuperEdge's controller wrote its children with client-go
// Create/Update under the same name (its binary's user agent), and this
// controller creates children with Create. Such fields stay owned forever
// unless moved into our Apply entry: a field later dropped from the grid
// would otherwise never leave the child.
func ownedByUpdate(obj metav1.Object) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == "" {
			return true
		}
	}
	return false
}

// migrateOwnership moves the Update entry's fields into our Apply entry
// (client-go's csaupgrade, as kubectl does when switching to server-side
// apply), guarded by the child's resourceVersion. It reads the child live:
// the cache keeps only our own managedFields entries.
func (c *gridController[G, C, A]) migrateOwnership(ctx context.Context, cached C) error {
	live, err := c.store.liveChild(ctx, cached.GetNamespace(), cached.GetName())
	if err != nil {
		return err
	}
	if live.GetUID() != cached.GetUID() {
		return fmt.Errorf("%s %s was replaced (uid %s, cached %s)", c.childKind, cached.GetName(), live.GetUID(), cached.GetUID())
	}
	data, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldManager), FieldManager)
	if err != nil || data == nil {
		return err
	}
	if _, err := c.store.patch(ctx, live.GetNamespace(), live.GetName(), types.JSONPatchType, data); err != nil {
		return fmt.Errorf("migrate field ownership of %s %s: %w", c.childKind, live.GetName(), err)
	}
	klog.FromContext(ctx).V(2).Info("Moved field ownership from Update to Apply", "child", klog.KObj(live), "manager", FieldManager)
	return nil
}
