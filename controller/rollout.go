package controller

import (
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
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
// start times, target and last good revisions, the halt). The decisions
// are the predicates of rollout_rules.go; this is their order.
func planRollout(s *superedgev1.RolloutStrategy, key string, now time.Time, units []unitView, templates map[string]templateState, prev *superedgev1.RolloutStatus) rolloutPlan {
	p := newRolloutPlanner(s, key, now, units, templates)
	p.halt = stillHalted(prev, templates)
	p.observeUnits()
	if p.halt == nil {
		p.haltOnFirstFailure()
	}
	if p.stopped() {
		p.holdStopped()
	}
	current, total := currentWave(p.order, p.plan.units)
	if !p.stopped() && current >= 0 {
		p.startWave(current)
	}
	p.plan.status = p.status(current, total)
	return p.plan
}

// rolloutPlanner is one planRollout call: its inputs and the plan it builds.
type rolloutPlanner struct {
	strategy  *superedgev1.RolloutStrategy
	limits    rolloutLimits
	now       time.Time
	units     []unitView
	byValue   map[string]unitView
	templates map[string]templateState
	waves     map[string]int32
	// order is every nodeunit by wave, then name.
	order []string
	halt  *superedgev1.RolloutHalt
	plan  rolloutPlan
}

func newRolloutPlanner(s *superedgev1.RolloutStrategy, key string, now time.Time, units []unitView, templates map[string]templateState) *rolloutPlanner {
	p := &rolloutPlanner{
		strategy: s, limits: limitsOf(s), now: now, units: units, templates: templates,
		byValue: make(map[string]unitView, len(units)),
		plan:    rolloutPlan{units: make(map[string]unitDecision, len(units))},
	}
	for _, u := range units {
		p.byValue[u.value] = u
	}
	p.waves, p.order = assignWaves(s, key, units)
	return p
}

// stopped: a halted or paused rollout changes no further nodeunit.
func (p *rolloutPlanner) stopped() bool { return p.halt != nil || p.strategy.Paused }

// observeUnits gives every nodeunit the phase its child shows.
func (p *rolloutPlanner) observeUnits() {
	for _, u := range p.units {
		d, wakeAt := observe(u, p.templates[u.template], p.limits, p.now)
		d.wave = p.waves[u.value]
		p.wakeAt(wakeAt)
		p.plan.units[u.value] = d
	}
}

// haltOnFirstFailure halts the rollout on its first failed nodeunit, in
// wave order.
func (p *rolloutPlanner) haltOnFirstFailure() {
	for _, v := range p.order {
		if d := p.plan.units[v]; d.phase == superedgev1.PhaseFailed {
			p.halt = haltOn(p.byValue[v], d, p.limits.deadline, p.now)
			p.plan.halted = p.halt
			return
		}
	}
}

// holdStopped: while stopped, a new nodeunit gets the last good template,
// and after a halt the Rollback policy gives it back to the failed ones.
func (p *rolloutPlanner) holdStopped() {
	for _, u := range p.units {
		d := p.plan.units[u.value]
		t := p.templates[u.template]
		if startsOnLastGood(u, t) {
			d.action, d.phase, d.revision = actionLastGood, superedgev1.PhaseWaiting, t.lastGood
		}
		if p.halt != nil && rollsBack(p.strategy, u, d, t) {
			d.action, d.phase, d.revision, d.since = actionLastGood, superedgev1.PhaseRolledBack, t.lastGood, statusTime(p.now)
		}
		p.plan.units[u.value] = d
	}
}

// startWave moves the current wave's waiting nodeunits to the target while
// fewer than maxUnavailableUnits are unavailable.
func (p *rolloutPlanner) startWave(current int32) {
	busy := 0
	for _, u := range p.units {
		if unavailable(u, p.plan.units[u.value]) {
			busy++
		}
	}
	for _, v := range p.order {
		d := p.plan.units[v]
		u := p.byValue[v]
		if !waitsIn(d, current) || !mayStart(u, busy, p.limits.maxUnavailable) {
			continue
		}
		if u.exists && u.healthy {
			busy++ // it becomes unavailable now
		}
		d.action, d.phase, d.since, d.revision = actionTarget, superedgev1.PhaseUpdating, statusTime(p.now), p.templates[u.template].target
		p.wakeAt(p.now.Add(p.limits.deadline + time.Second))
		p.plan.units[v] = d
	}
}

// status is what the grid's status.rollout says of the plan; a template
// whose nodeunits are all done becomes the last good one.
func (p *rolloutPlanner) status(current, total int32) superedgev1.RolloutStatus {
	st := superedgev1.RolloutStatus{
		Phase:  rolloutPhase(p.halt, p.strategy.Paused, current),
		Wave:   waveText(current, total),
		Halted: p.halt,
	}
	done := templatesDone(p.units, p.plan.units, p.templates)
	for _, name := range slices.Sorted(maps.Keys(p.templates)) {
		t := p.templates[name]
		tr := superedgev1.TemplateRevisions{Name: name, Target: t.target, LastGood: t.lastGood, LastGoodTemplate: t.lastGoodRaw}
		if becomesLastGood(done[name], p.halt != nil, t) {
			tr.LastGood, tr.LastGoodTemplate = t.target, &runtime.RawExtension{Raw: t.targetJSON}
		}
		st.Templates = append(st.Templates, tr)
	}
	return st
}

// wakeAt asks for the grid to be synced again at t, when time alone changes
// a phase (zero: never); the earliest such time wins.
func (p *rolloutPlanner) wakeAt(t time.Time) {
	if t.IsZero() {
		return
	}
	if d := t.Sub(p.now); d > 0 && (p.plan.requeue == 0 || d < p.plan.requeue) {
		p.plan.requeue = d
	}
}
