package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// planRollout gathers what the planner needs for a grid with spec.rollout
// (nil without one: every child is updated at once, as always): each
// template's target and last good revision, and per nodeunit which of them
// its child runs and whether it is healthy.
func (c *gridController[G, C, A]) planRollout(grid G, units []unit, controlled map[string]C) *rolloutPlan {
	if c.rollouts == nil {
		return nil
	}
	strategy := c.rollouts.strategy(grid)
	if strategy == nil {
		return nil
	}
	prev, prevUnits := c.rolloutStatus(grid)
	prevLastGood := map[string]superedgev1.TemplateRevisions{}
	if prev != nil {
		for _, t := range prev.Templates {
			prevLastGood[t.Name] = t
		}
	}
	prevUnit := map[string]superedgev1.NodeUnitStatus{}
	for _, u := range prevUnits {
		prevUnit[u.Name] = u
	}
	templates := map[string]templateState{}
	lastGood := map[string][]byte{}
	var views []unitView
	for _, u := range units {
		if c.grids.validName(u.name) != nil {
			continue
		}
		t, ok := templates[u.template]
		if !ok {
			data, err := c.rollouts.templateJSON(grid, u.template)
			if err != nil {
				continue // unknown template: reported by the sync, child kept
			}
			t = templateState{target: templateRevision(data), targetJSON: data}
			if p, ok := prevLastGood[u.template]; ok && p.LastGood != "" && p.LastGoodTemplate != nil {
				t.lastGood, t.lastGoodRaw = p.LastGood, p.LastGoodTemplate
				lastGood[u.template] = p.LastGoodTemplate.Raw
			}
			templates[u.template] = t
		}
		v := unitView{value: u.value, template: u.template, prev: prevUnit[u.value]}
		live, isOurs := controlled[u.name]
		if !isOurs {
			if other, err := c.store.child(grid.GetNamespace(), u.name); err == nil {
				live, isOurs = other, true // an adoptable predecessor's child counts as existing
			}
		}
		if isOurs {
			v.exists = true
			v.healthy = c.rollouts.healthy(live)
			v.failure = c.rollouts.failure(live)
			have := c.applied.hashOf(live)
			if h, err := c.desiredHash(grid, u); err == nil && have != "" && h == have {
				v.runs = runsTarget
			} else if t.lastGood != "" {
				lu := u
				lu.override = lastGood[u.template]
				if h, err := c.desiredHash(grid, lu); err == nil && have != "" && h == have {
					v.runs = runsLastGood
				}
			}
		}
		views = append(views, v)
	}
	plan := planRollout(strategy, c.grids.gridKey(grid), time.Now(), views, templates, prev)
	plan.lastGood = lastGood
	return &plan
}

// templateRevision is a short digest of a template's JSON form.
func templateRevision(templateJSON []byte) string {
	sum := sha256.Sum256(templateJSON)
	return hex.EncodeToString(sum[:5])
}

// appliedHashOf is the applied-hash annotation an apply configuration carries.
func appliedHashOf(cfg any) string {
	m, err := toJSONMap(cfg)
	if err != nil {
		return ""
	}
	return nestedString(m, "metadata", "annotations", AnnotationAppliedHash)
}

// rolloutStatus is the grid's status.rollout and status.units (none for a
// kind without spec.rollout).
func (c *gridController[G, C, A]) rolloutStatus(grid G) (*superedgev1.RolloutStatus, []superedgev1.NodeUnitStatus) {
	if c.rollouts == nil {
		return nil, nil
	}
	return c.rollouts.rolloutStatus(grid)
}

// keptRollout is the rollout status a sync that touched no child keeps.
func keptRollout(prev *superedgev1.RolloutStatus) *superedgev1.RolloutStatus {
	if prev == nil {
		return nil
	}
	return prev.DeepCopy()
}

// rolloutEvents emits a Warning Event when this sync halted the rollout.
func (c *gridController[G, C, A]) rolloutEvents(grid G, plan *rolloutPlan) {
	if h := plan.halted; h != nil {
		c.recorder.Event(grid, corev1.EventTypeWarning, ReasonRolloutHalted, h.Message)
	}
	for v, d := range plan.units {
		if d.action == actionLastGood && d.phase == superedgev1.PhaseRolledBack {
			c.recorder.Eventf(grid, corev1.EventTypeWarning, ReasonRolledBack, "nodeunit %q rolled back to its last good template revision %s", v, d.revision)
		}
	}
}

// setRolloutConditions sets Progressing, Paused, Halted and Complete from
// the rollout status, or removes them for a grid without spec.rollout.
func setRolloutConditions(conds *[]metav1.Condition, ro *superedgev1.RolloutStatus, gen int64) {
	types := []string{superedgev1.ConditionProgressing, superedgev1.ConditionPaused, superedgev1.ConditionHalted, superedgev1.ConditionComplete}
	if ro == nil {
		for _, t := range types {
			meta.RemoveStatusCondition(conds, t)
		}
		return
	}
	set := func(t string, on bool, reason, msg string) {
		status := metav1.ConditionFalse
		if on {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	msg := fmt.Sprintf("wave %s", ro.Wave)
	set(superedgev1.ConditionProgressing, ro.Phase == superedgev1.PhaseProgressing, string(ro.Phase), msg)
	set(superedgev1.ConditionPaused, ro.Phase == superedgev1.PhasePaused, string(ro.Phase), msg)
	haltMsg := "no nodeunit failed"
	if ro.Halted != nil {
		haltMsg = ro.Halted.Message
	}
	haltReason := string(ro.Phase)
	if ro.Halted != nil {
		haltReason = ro.Halted.Reason
	}
	set(superedgev1.ConditionHalted, ro.Halted != nil, haltReason, haltMsg)
	set(superedgev1.ConditionComplete, ro.Phase == superedgev1.PhaseComplete, string(ro.Phase), msg)
}
