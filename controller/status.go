package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// finish sets the conditions, emits Warning Events when the reconciled state
// changes (not on every resync), and writes the status if it changed.
func (c *gridController[G, C, A]) finish(ctx context.Context, grid G, kept []child[C], problems []problem, rollout *superedgev1.RolloutStatus) error {
	old := c.grids.conditions(grid)
	conds := make([]metav1.Condition, len(old))
	copy(conds, old)
	gen := grid.GetGeneration()

	reconciled := metav1.Condition{Type: superedgev1.ConditionReconciled, Status: metav1.ConditionTrue, Reason: ReasonReconciled,
		Message: fmt.Sprintf("every %s is in place", c.childKind), ObservedGeneration: gen}
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.message
		}
		reconciled.Status, reconciled.Reason, reconciled.Message = metav1.ConditionFalse, problems[0].reason, strings.Join(msgs, "; ")
	}
	ready := 0
	for _, ch := range kept {
		if c.grids.ready(ch.obj) {
			ready++
		}
	}
	readyCond := metav1.Condition{Type: superedgev1.ConditionReady, ObservedGeneration: gen}
	switch {
	case len(kept) == 0:
		readyCond.Status, readyCond.Reason, readyCond.Message = metav1.ConditionFalse, ReasonNoNodeUnits, fmt.Sprintf("no %s exists", c.childKind)
	case ready == len(kept) && len(problems) == 0:
		readyCond.Status, readyCond.Reason, readyCond.Message = metav1.ConditionTrue, ReasonReady, fmt.Sprintf("%d/%d ready", ready, len(kept))
	default:
		readyCond.Status, readyCond.Reason, readyCond.Message = metav1.ConditionFalse, ReasonNotReady, fmt.Sprintf("%d/%d ready", ready, len(kept))
	}

	recordGridReady(c.kind, grid.GetNamespace(), grid.GetName(), readyCond.Status == metav1.ConditionTrue)
	unitPods := map[string]int32{}
	for _, ch := range kept {
		if n, ok := readyPodsOf(ch.obj); ok {
			unitPods[ch.value] = n
		}
	}
	recordNodeunitPods(c.kind, grid.GetNamespace(), grid.GetName(), unitPods)

	conflictCond := metav1.Condition{Type: superedgev1.ConditionConflict, Status: metav1.ConditionFalse, Reason: ReasonNoConflict,
		Message: "no child name is taken by someone else's object", ObservedGeneration: gen}
	var conflicts []string
	for _, p := range problems {
		if p.reason == ReasonNameConflict {
			conflicts = append(conflicts, p.message)
		}
	}
	if len(conflicts) > 0 {
		conflictCond.Status, conflictCond.Reason, conflictCond.Message = metav1.ConditionTrue, ReasonNameConflict, strings.Join(conflicts, "; ")
	}
	meta.SetStatusCondition(&conds, conflictCond)

	prev := meta.FindStatusCondition(old, superedgev1.ConditionReconciled)
	changed := prev == nil || prev.Status != reconciled.Status || prev.Reason != reconciled.Reason || prev.Message != reconciled.Message
	meta.SetStatusCondition(&conds, reconciled)
	meta.SetStatusCondition(&conds, readyCond)
	setRolloutConditions(&conds, rollout, gen)
	if changed && len(problems) > 0 {
		for _, p := range problems {
			klog.FromContext(ctx).Info("Grid not fully reconciled", "reason", p.reason, "message", p.message)
			c.recorder.Event(grid, corev1.EventTypeWarning, p.reason, p.message)
		}
	}
	if err := c.writeStatus(ctx, grid, kept, conds, rollout); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

// writeStatus builds the grid's status from its children and the
// conditions, and writes it only if it differs.
func (c *gridController[G, C, A]) writeStatus(ctx context.Context, grid G, children []child[C], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) error {
	key := cache.MetaObjectToName(grid)
	next, changed := c.grids.withStatus(grid, children, conds, rollout)
	if !changed {
		c.statusDelay.done(key)
		return nil
	}
	if c.grids.foldable(grid, next) {
		if c.statusDelay.held(key, time.Now(), c.queue) {
			return nil
		}
	}
	written, err := c.store.updateStatus(ctx, next)
	if err != nil {
		if apierrors.IsConflict(err) {
			c.statusWrites.forget(key)
		}
		return err // a held change stays due: the retry writes it
	}
	c.statusWrites.remember(grid, written)
	c.statusDelay.done(key)
	return nil
}

// unitStatus is a child's line in the grid's status.
func unitStatus[C object](ch child[C], ready bool) superedgev1.NodeUnitStatus {
	st := superedgev1.NodeUnitStatus{Name: ch.value, Child: ch.name, Template: ch.template, Ready: ready, Pending: ch.pending}
	if d := ch.rollout; d != nil {
		wave, since := d.wave, d.since
		st.Revision, st.Phase, st.Wave, st.Since = d.revision, d.phase, &wave, &since
	}
	return st
}

// sortUnits orders the status lines by nodeunit, so equal states compare equal.
func sortUnits(units []superedgev1.NodeUnitStatus) {
	slices.SortFunc(units, func(a, b superedgev1.NodeUnitStatus) int { return strings.Compare(a.Name, b.Name) })
}
