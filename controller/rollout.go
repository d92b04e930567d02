package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// Defaults of spec.rollout.
const (
	defaultMaxUnavailableUnits     = 1
	defaultProgressDeadlineSeconds = 600
)

// unitAction is what the controller does to one nodeunit's child.
type unitAction int

const (
	// actionKeep leaves the child as it is (its wave has not come, or the
	// rollout is paused or halted).
	actionKeep unitAction = iota
	// actionTarget applies the template in the spec.
	actionTarget
	// actionLastGood applies the template the rollout last saw healthy.
	actionLastGood
)

// runs says which recorded template revision a child runs.
type runs int

const (
	runsOther runs = iota
	runsTarget
	runsLastGood
)

// unitView is what the planner knows of one nodeunit.
type unitView struct {
	value    string
	template string
	exists   bool
	runs     runs
	healthy  bool
	// failure is a reason the child itself reports, e.g. ProgressDeadlineExceeded.
	failure string
	prev    superedgev1.NodeUnitStatus
}

// templateState is one template's revisions: the spec's (target) and the
// last one every nodeunit using it ran healthy.
type templateState struct {
	target, lastGood string
	targetJSON       []byte
	// lastGoodRaw is the last good template as the status holds it (kept
	// as read, so an unchanged status compares equal).
	lastGoodRaw *runtime.RawExtension
}

// unitDecision is the planner's verdict for one nodeunit.
type unitDecision struct {
	action   unitAction
	phase    superedgev1.RolloutPhase
	wave     int32
	since    metav1.Time
	revision string
}

// rolloutPlan is the verdict for a whole grid.
type rolloutPlan struct {
	units  map[string]unitDecision
	status superedgev1.RolloutStatus
	// halted is set when this sync halted the rollout (Warning Event).
	halted *superedgev1.RolloutHalt
	// requeue is when time alone changes a phase (bake or deadline ends); 0: never.
	requeue time.Duration
	// lastGood holds each template's last good JSON, for actionLastGood.
	lastGood map[string][]byte
}

// planRollout decides, from the spec's strategy, the nodeunits' children and
// the status the last sync wrote, which nodeunits change now. It is the
// whole rollout logic and has no side effects: everything it needs to
// resume after a restart is in the status it returns (phases with their
// start times, target and last good revisions, the halt).
func planRollout(s *superedgev1.RolloutStrategy, key string, now time.Time, units []unitView, templates map[string]templateState, prev *superedgev1.RolloutStatus) rolloutPlan {
	nowT := metav1.NewTime(now.Truncate(time.Second))
	bake := time.Duration(s.BakeSeconds) * time.Second
	deadline := time.Duration(defaultProgressDeadlineSeconds) * time.Second
	if s.ProgressDeadlineSeconds != nil {
		deadline = time.Duration(*s.ProgressDeadlineSeconds) * time.Second
	}
	maxUnavailable := defaultMaxUnavailableUnits
	if s.MaxUnavailableUnits != nil && *s.MaxUnavailableUnits > 0 {
		maxUnavailable = int(*s.MaxUnavailableUnits)
	}

	waves, order := assignWaves(s, key, units)
	plan := rolloutPlan{units: make(map[string]unitDecision, len(units))}
	var halt *superedgev1.RolloutHalt
	if prev != nil && prev.Halted != nil {
		if t, ok := templates[prev.Halted.Template]; ok && t.target == prev.Halted.Revision {
			halt = prev.Halted.DeepCopy() // the spec has not changed since: still halted
		}
	}
	wake := func(at time.Time) {
		if d := at.Sub(now); d > 0 && (plan.requeue == 0 || d < plan.requeue) {
			plan.requeue = d
		}
	}

	// Phase of every nodeunit from what its child shows.
	for _, u := range units {
		t := templates[u.template]
		d := unitDecision{wave: waves[u.value], since: nowT}
		sameRev := u.prev.Revision == t.target && u.prev.Since != nil
		switch {
		case !u.exists:
			d.action, d.phase, d.revision = actionTarget, superedgev1.PhaseUpdating, t.target
		case u.runs == runsTarget:
			d.action, d.revision = actionTarget, t.target
			switch {
			case u.healthy && sameRev && u.prev.Phase == superedgev1.PhaseDone:
				d.phase, d.since = superedgev1.PhaseDone, *u.prev.Since
			case u.healthy && sameRev && u.prev.Phase == superedgev1.PhaseBaking:
				d.phase, d.since = superedgev1.PhaseBaking, *u.prev.Since
				if !now.Before(u.prev.Since.Add(bake)) {
					d.phase, d.since = superedgev1.PhaseDone, nowT
				} else {
					wake(u.prev.Since.Add(bake))
				}
			case u.healthy:
				d.phase = superedgev1.PhaseBaking
				if bake == 0 {
					d.phase = superedgev1.PhaseDone
				} else {
					wake(now.Add(bake))
				}
			case sameRev && u.prev.Phase == superedgev1.PhaseFailed:
				d.phase, d.since = superedgev1.PhaseFailed, *u.prev.Since
			case u.failure != "":
				d.phase = superedgev1.PhaseFailed
			case sameRev && u.prev.Phase == superedgev1.PhaseUpdating:
				d.phase, d.since = superedgev1.PhaseUpdating, *u.prev.Since
				if now.Sub(u.prev.Since.Time) > deadline {
					d.phase, d.since = superedgev1.PhaseFailed, nowT
				} else {
					wake(u.prev.Since.Add(deadline + time.Second))
				}
			default:
				d.phase = superedgev1.PhaseUpdating
				wake(now.Add(deadline + time.Second))
			}
		default:
			d.action, d.phase = actionKeep, superedgev1.PhaseWaiting
			if u.runs == runsLastGood {
				d.revision = t.lastGood
			}
			if u.runs == runsLastGood && u.prev.Phase == superedgev1.PhaseRolledBack {
				d.phase = superedgev1.PhaseRolledBack
			}
			if u.prev.Phase == d.phase && u.prev.Since != nil {
				d.since = *u.prev.Since
			}
		}
		plan.units[u.value] = d
	}

	// The first failure halts the rollout.
	if halt == nil {
		for _, v := range order {
			d := plan.units[v]
			if d.phase != superedgev1.PhaseFailed {
				continue
			}
			u := viewOf(units, v)
			reason, msg := "ProgressDeadlineExceeded", fmt.Sprintf("nodeunit %q did not become healthy within %s on template %q revision %s", v, deadline, u.template, d.revision)
			if u.failure != "" {
				reason, msg = u.failure, fmt.Sprintf("nodeunit %q: its child reports %s on template %q revision %s", v, u.failure, u.template, d.revision)
			}
			halt = &superedgev1.RolloutHalt{NodeUnit: v, Template: u.template, Revision: d.revision, Reason: reason, Message: msg, Time: &nowT}
			plan.halted = halt
			break
		}
	}

	// A halted or paused rollout changes nothing more; new nodeunits get
	// the last good template when there is one.
	stopped := halt != nil || s.Paused
	for _, u := range units {
		d := plan.units[u.value]
		t := templates[u.template]
		if stopped && !u.exists && t.lastGood != "" {
			d.action, d.phase, d.revision = actionLastGood, superedgev1.PhaseWaiting, t.lastGood
		}
		if halt != nil && s.FailurePolicy == superedgev1.FailurePolicyRollback && t.lastGood != "" && t.lastGood != t.target &&
			u.exists && u.runs == runsTarget && (d.phase == superedgev1.PhaseFailed || d.phase == superedgev1.PhaseUpdating) {
			d.action, d.phase, d.revision, d.since = actionLastGood, superedgev1.PhaseRolledBack, t.lastGood, nowT
		}
		plan.units[u.value] = d
	}

	// The current wave is the first with a nodeunit not done.
	current, total := int32(-1), int32(0)
	for _, v := range order {
		d := plan.units[v]
		total = max(total, d.wave+1)
		if current < 0 && d.phase != superedgev1.PhaseDone {
			current = d.wave
		}
	}
	if !stopped && current >= 0 {
		busy := 0
		for _, u := range units {
			d := plan.units[u.value]
			switch {
			case d.phase == superedgev1.PhaseUpdating, d.phase == superedgev1.PhaseBaking, d.phase == superedgev1.PhaseFailed:
				busy++
			case d.phase == superedgev1.PhaseWaiting && u.exists && !u.healthy:
				busy++ // unhealthy anyway: counts against maxUnavailableUnits
			}
		}
		for _, v := range order {
			d := plan.units[v]
			if d.wave != current || d.action != actionKeep || d.phase != superedgev1.PhaseWaiting {
				continue
			}
			u := viewOf(units, v)
			if !(u.exists && !u.healthy) && busy >= maxUnavailable {
				continue
			}
			if u.exists && u.healthy {
				busy++
			}
			d.action, d.phase, d.since, d.revision = actionTarget, superedgev1.PhaseUpdating, nowT, templates[u.template].target
			wake(now.Add(deadline + time.Second))
			plan.units[v] = d
		}
	}

	// Status: phase, wave, and each template's revisions; a template whose
	// nodeunits are all done becomes the last good one.
	st := superedgev1.RolloutStatus{Halted: halt}
	switch {
	case halt != nil:
		st.Phase = superedgev1.PhaseHalted
	case s.Paused:
		st.Phase = superedgev1.PhasePaused
	case current < 0:
		st.Phase = superedgev1.PhaseComplete
	default:
		st.Phase = superedgev1.PhaseProgressing
	}
	shown := current + 1
	if current < 0 {
		shown = total
	}
	st.Wave = fmt.Sprintf("%d/%d", shown, total)
	done := map[string]bool{}
	for name := range templates {
		done[name] = true
	}
	for _, u := range units {
		if plan.units[u.value].phase != superedgev1.PhaseDone {
			done[u.template] = false
		}
	}
	for _, name := range sortedNames(templates) {
		t := templates[name]
		tr := superedgev1.TemplateRevisions{Name: name, Target: t.target, LastGood: t.lastGood, LastGoodTemplate: t.lastGoodRaw}
		if done[name] && halt == nil && t.lastGood != t.target {
			tr.LastGood, tr.LastGoodTemplate = t.target, &runtime.RawExtension{Raw: t.targetJSON}
		}
		st.Templates = append(st.Templates, tr)
	}
	plan.status = st
	return plan
}

// assignWaves puts the canary nodeunits in wave 0 and the others, in name
// order, in waves of spec.rollout.waveSize; order lists every nodeunit by
// wave, then name.
func assignWaves(s *superedgev1.RolloutStrategy, key string, units []unitView) (map[string]int32, []string) {
	var canary, rest []string
	var sel labels.Selector
	if s.Canary != nil && s.Canary.Selector != nil {
		// Validated by the CRD schema's LabelSelector shape; a selector
		// that still fails to parse selects nothing.
		if parsed, err := metav1.LabelSelectorAsSelector(s.Canary.Selector); err == nil {
			sel = parsed
		}
	}
	for _, u := range units {
		named := s.Canary != nil && slices.Contains(s.Canary.NodeUnits, u.value)
		if named || (sel != nil && !sel.Empty() && sel.Matches(labels.Set{key: u.value})) {
			canary = append(canary, u.value)
		} else {
			rest = append(rest, u.value)
		}
	}
	slices.Sort(canary)
	slices.Sort(rest)
	size := len(rest)
	if s.WaveSize != nil && len(rest) > 0 {
		n, err := intstr.GetScaledValueFromIntOrPercent(s.WaveSize, len(rest), true)
		if err == nil && n > 0 {
			size = n
		}
	}
	waves := make(map[string]int32, len(units))
	order := make([]string, 0, len(units))
	first := int32(0)
	if len(canary) > 0 {
		for _, v := range canary {
			waves[v] = 0
		}
		order = append(order, canary...)
		first = 1
	}
	for i, v := range rest {
		waves[v] = first + int32(i/max(size, 1))
	}
	order = append(order, rest...)
	return waves, order
}

func viewOf(units []unitView, value string) unitView {
	for _, u := range units {
		if u.value == value {
			return u
		}
	}
	return unitView{}
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// templateRevision is a short digest of a template's JSON form.
func templateRevision(templateJSON []byte) string {
	sum := sha256.Sum256(templateJSON)
	return hex.EncodeToString(sum[:5])
}

// rolloutMessage summarises a plan for the conditions.
func rolloutMessage(p rolloutPlan) string {
	counts := map[superedgev1.RolloutPhase]int{}
	for _, d := range p.units {
		counts[d.phase]++
	}
	var parts []string
	for _, ph := range []superedgev1.RolloutPhase{superedgev1.PhaseDone, superedgev1.PhaseBaking, superedgev1.PhaseUpdating,
		superedgev1.PhaseWaiting, superedgev1.PhaseFailed, superedgev1.PhaseRolledBack} {
		if counts[ph] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[ph], strings.ToLower(string(ph))))
		}
	}
	return fmt.Sprintf("wave %s: %s", p.status.Wave, strings.Join(parts, ", "))
}
