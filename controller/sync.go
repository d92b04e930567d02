package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridunit"
)

// problem is one reason the grid is not fully reconciled.
type problem struct {
	reason  string
	message string
}

// sync makes the grid's children match its spec and nodeunits, then
// records the outcome in its status.
func (c *gridController[G, C, A]) sync(ctx context.Context, key cache.ObjectName) error {
	grid, err := c.store.grid(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		c.grace.forgetGrid(key)
		c.statusWrites.forget(key)
		c.statusDelay.done(key)
		c.created.forgetGrid(key)
		c.hashes.forget(key)
		forgetGridReady(c.kind, key.Namespace, key.Name)
		return nil // deleted: the garbage collector removes its children
	}
	if err != nil {
		return err
	}
	grid = c.statusWrites.latest(grid)
	if grid.GetDeletionTimestamp() != nil {
		forgetGridReady(c.kind, key.Namespace, key.Name)
		return nil
	}
	logger := klog.FromContext(ctx).WithValues(strings.ToLower(c.kind), klog.KObj(grid))
	ctx = klog.NewContext(ctx, logger)

	gridKey := c.grids.gridKey(grid)
	candidates, err := c.store.candidates(grid.GetNamespace(), grid.GetName())
	if err != nil {
		return err
	}
	reason, err := validGrid(grid.GetName(), gridKey)
	if err == nil && c.restrictedKeys {
		if err = untrustedGridKey(gridKey); err != nil {
			reason = ReasonUntrustedGridUniqKey
		}
	}
	if err == nil {
		reason, err = c.grids.refused(grid)
	}
	if err != nil {
		// Bad spec: touch no child, only report (the status still lists them).
		var kept []child[C]
		for _, ch := range candidates {
			if metav1.IsControlledBy(ch, grid) {
				kept = append(kept, child[C]{unit: unit{value: c.valueOf(grid, ch.GetName()), name: ch.GetName()}, obj: ch})
			}
		}
		prev, _ := c.rolloutStatus(grid)
		return c.finish(ctx, grid, kept, []problem{{reason, err.Error()}}, keptRollout(prev))
	}
	var errs []error
	var problems []problem
	controlled := map[string]C{}
	for _, ch := range candidates {
		if !metav1.IsControlledBy(ch, grid) {
			continue
		}
		if ch.GetLabels()[superedgev1.LabelGridSelector] != grid.GetName() {
			if err := c.release(ctx, grid, ch); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		controlled[ch.GetName()] = ch
	}
	c.created.addUncached(key, controlled, func(name string) (C, bool) {
		ch, err := c.store.child(key.Namespace, name)
		return ch, err == nil
	}, time.Now())

	units := c.grids.units(grid)
	plan := c.planRollout(grid, units, controlled)
	wanted := make(map[string]bool, len(units))
	kept := make([]child[C], 0, len(units))
	for _, u := range units {
		wanted[u.name] = true
		live, isOurs := controlled[u.name]
		ch, prob, err := c.syncUnit(ctx, key, grid, gridKey, plan, u, live, isOurs)
		if ch != nil {
			kept = append(kept, *ch)
		}
		if prob != nil {
			problems = append(problems, *prob)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}

	pending, err := c.removeVanished(ctx, grid, controlled, wanted)
	if err != nil {
		errs = append(errs, err)
	}
	kept = append(kept, pending...)

	var ro *superedgev1.RolloutStatus
	if plan != nil {
		ro = &plan.status
		c.rolloutEvents(grid, plan)
		if plan.requeue > 0 {
			c.queue.AddAfter(key, plan.requeue)
		}
	}
	errs = append(errs, c.finish(ctx, grid, kept, problems, ro))
	return errors.Join(errs...)
}

// valueOf is the nodeunit value in a child's name {grid}-{value}, read by
// gridunit's rule; a controlled child of another name is shown by its name.
func (c *gridController[G, C, A]) valueOf(grid G, name string) string {
	if v, ok := gridunit.ValueOf(grid.GetName(), name); ok {
		return v
	}
	return name
}

// conflict reports a name taken by an object that is not the grid's.
func conflict(kind string, u unit) problem {
	return problem{ReasonNameConflict, fmt.Sprintf("nodeunit %q skipped: %s %q exists and belongs neither to this grid nor to its SuperEdge predecessor; it is left untouched", u.value, kind, u.name)}
}
