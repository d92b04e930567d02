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

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// syncUnit brings one unit's child in line with the grid. It returns the
// child to report for the unit (nil: none), a problem with the unit and an
// error to retry on; a unit waiting for its old child to go is looked at
// again in a second.
func (c *gridController[G, C, A]) syncUnit(ctx context.Context, key cache.ObjectName, grid G, gridKey string, plan *rolloutPlan, u unit, live C, isOurs bool) (*child[C], *problem, error) {
	// ours is the unit's child as it is now, or none.
	ours := func(ch child[C]) *child[C] {
		if !isOurs {
			return nil
		}
		return &ch
	}
	if err := c.grids.validName(u.name); err != nil {
		return ours(child[C]{unit: u, obj: live}), // never delete what exists
			&problem{ReasonInvalidChildName, fmt.Sprintf("nodeunit %q skipped: %s name %q %v", u.value, c.childKind, u.name, err)}, nil
	}
	if isOurs && live.GetDeletionTimestamp() != nil {
		// Being deleted (re-created for an immutable field, or by someone):
		// created anew once it is gone.
		c.queue.AddAfter(key, time.Second)
		return &child[C]{unit: u, obj: live, pending: "re-create once the old object is gone"}, nil, nil
	}
	var decision *unitDecision
	if plan != nil {
		if d, ok := plan.units[u.value]; ok {
			decision = &d
			switch d.action {
			case actionKeep:
				return ours(child[C]{unit: u, obj: live, rollout: decision}), nil, nil
			case actionLastGood:
				u.override = plan.lastGood[u.template]
			}
		}
	}
	adopt := false
	if !isOurs {
		other, err := c.store.child(grid.GetNamespace(), u.name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, nil, err
		case metav1.IsControlledBy(other, grid) && other.GetLabels()[superedgev1.LabelGridSelector] == grid.GetName():
			// The grid's own child, cached after this sync read the grid's
			// children: made by the sync just before (created.go).
			live, isOurs = other, true
		case !c.adoptable(grid, gridKey, other):
			p := conflict(c.childKind, u)
			return nil, &p, nil
		default:
			if err := c.recheck(ctx, grid); err != nil {
				return nil, nil, err
			}
			live, adopt = other, true
		}
	}
	obj, err := c.ensure(ctx, grid, u, live, isOurs || adopt)
	var unknown unknownTemplateError
	var immutable immutableChange
	switch {
	case errors.Is(err, errRecreating):
		c.queue.AddAfter(key, time.Second)
		return &child[C]{unit: u, obj: live, pending: "re-create once the old object is gone"}, nil, nil
	case errors.As(err, &immutable):
		// Retrying cannot help: say which field and the way out.
		way := fmt.Sprintf("delete %s %s to have it re-created", c.childKind, u.name)
		if immutable.selector {
			way += " (its pods are replaced: a new selector cannot adopt them)"
		}
		return &child[C]{unit: u, obj: live},
			&problem{ReasonImmutableField, fmt.Sprintf("nodeunit %q: %s %q: %v; %s", u.value, c.childKind, u.name, err, way)}, nil
	case errors.As(err, &unknown):
		// A spec mistake: report it and keep the current child; retrying cannot help.
		return ours(child[C]{unit: u, obj: live}),
			&problem{ReasonUnknownTemplate, fmt.Sprintf("nodeunit %q keeps its current %s: %v", u.value, c.childKind, err)}, nil
	case apierrors.IsAlreadyExists(err):
		// Someone created the name between our cache read and our create:
		// theirs, untouched; the retry sees it in the cache.
		p := conflict(c.childKind, u)
		return nil, &p, err
	case err != nil:
		return ours(child[C]{unit: u, obj: live}),
			&problem{ReasonApplyFailed, fmt.Sprintf("nodeunit %q: %s %q: %v", u.value, c.childKind, u.name, err)}, err
	}
	if adopt {
		c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonAdopted, "Adopted %s %s", c.childKind, u.name)
	}
	return &child[C]{unit: u, obj: obj, rollout: decision}, nil, nil
}
