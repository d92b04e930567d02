package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// One table per decision of rollout_rules.go and rollout_waves.go; the
// planner's order of them is tested by rollout_test.go.

var (
	t0   = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	t0m  = metav1.NewTime(t0)
	tmpl = templateState{target: "new", lastGood: "old"}
)

func TestRolloutLimits(t *testing.T) {
	for _, tc := range []struct {
		s        superedgev1.RolloutStrategy
		bake     time.Duration
		deadline time.Duration
		max      int
	}{
		{superedgev1.RolloutStrategy{}, 0, 600 * time.Second, 1},
		{superedgev1.RolloutStrategy{BakeSeconds: 30, ProgressDeadlineSeconds: ptr.To[int32](60), MaxUnavailableUnits: ptr.To[int32](5)}, 30 * time.Second, time.Minute, 5},
		{superedgev1.RolloutStrategy{ProgressDeadlineSeconds: ptr.To[int32](0), MaxUnavailableUnits: ptr.To[int32](0)}, 0, 0, 1},
		{superedgev1.RolloutStrategy{MaxUnavailableUnits: ptr.To[int32](-3)}, 0, 600 * time.Second, 1},
	} {
		got := limitsOf(&tc.s)
		if got.bake != tc.bake || got.deadline != tc.deadline || got.maxUnavailable != tc.max {
			t.Errorf("limitsOf(%+v) = %+v, want bake %s, deadline %s, maxUnavailable %d", tc.s, got, tc.bake, tc.deadline, tc.max)
		}
	}
}

func TestStillHalted(t *testing.T) {
	halt := &superedgev1.RolloutHalt{NodeUnit: "u1", Template: "default", Revision: "new", Reason: "ProgressDeadlineExceeded"}
	for _, tc := range []struct {
		name string
		prev *superedgev1.RolloutStatus
		want bool
	}{
		{"no status", nil, false},
		{"not halted", &superedgev1.RolloutStatus{}, false},
		{"same revision", &superedgev1.RolloutStatus{Halted: halt}, true},
		{"template changed since", &superedgev1.RolloutStatus{Halted: &superedgev1.RolloutHalt{Template: "default", Revision: "older"}}, false},
		{"template gone", &superedgev1.RolloutStatus{Halted: &superedgev1.RolloutHalt{Template: "canary", Revision: "new"}}, false},
	} {
		got := stillHalted(tc.prev, map[string]templateState{"default": tmpl})
		if (got != nil) != tc.want {
			t.Errorf("%s: stillHalted = %+v, want halted %v", tc.name, got, tc.want)
		}
		if got != nil && (got == tc.prev.Halted || *got != *halt) {
			t.Errorf("%s: want a copy of %+v, got %+v", tc.name, halt, got)
		}
	}
}

// TestObserve: the phase of each kind of child, its start time and when time
// alone changes it (bake 30s, deadline 60s).
func TestObserve(t *testing.T) {
	lim := rolloutLimits{bake: 30 * time.Second, deadline: time.Minute, maxUnavailable: 1}
	now := t0.Add(500 * time.Millisecond) // status times are whole seconds
	before := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(t0.Add(-d))) }
	prev := func(phase superedgev1.RolloutPhase, rev string, since *metav1.Time) superedgev1.NodeUnitStatus {
		return superedgev1.NodeUnitStatus{Phase: phase, Revision: rev, Since: since}
	}
	for _, tc := range []struct {
		name     string
		u        unitView
		action   unitAction
		phase    superedgev1.RolloutPhase
		revision string
		since    time.Time
		wake     time.Time
	}{
		{"no child: created on the target", unitView{}, actionTarget, superedgev1.PhaseUpdating, "new", t0, time.Time{}},
		{"older template: waits", unitView{exists: true, runs: runsOther, healthy: true}, actionKeep, superedgev1.PhaseWaiting, "", t0, time.Time{}},
		{"last good: waits on it", unitView{exists: true, runs: runsLastGood}, actionKeep, superedgev1.PhaseWaiting, "old", t0, time.Time{}},
		{"waiting since before", unitView{exists: true, runs: runsLastGood, prev: prev(superedgev1.PhaseWaiting, "old", before(time.Hour))},
			actionKeep, superedgev1.PhaseWaiting, "old", t0.Add(-time.Hour), time.Time{}},
		{"rolled back stays rolled back", unitView{exists: true, runs: runsLastGood, prev: prev(superedgev1.PhaseRolledBack, "old", before(time.Hour))},
			actionKeep, superedgev1.PhaseRolledBack, "old", t0.Add(-time.Hour), time.Time{}},
		{"rolled back but on another revision: waits", unitView{exists: true, runs: runsOther, prev: prev(superedgev1.PhaseRolledBack, "old", before(time.Hour))},
			actionKeep, superedgev1.PhaseWaiting, "", t0, time.Time{}},
		{"healthy, new: bakes", unitView{exists: true, runs: runsTarget, healthy: true}, actionTarget, superedgev1.PhaseBaking, "new", t0, now.Add(30 * time.Second)},
		{"healthy, baking 10s: bakes on", unitView{exists: true, runs: runsTarget, healthy: true, prev: prev(superedgev1.PhaseBaking, "new", before(10*time.Second))},
			actionTarget, superedgev1.PhaseBaking, "new", t0.Add(-10 * time.Second), t0.Add(20 * time.Second)},
		{"healthy, baked 30s: done now", unitView{exists: true, runs: runsTarget, healthy: true, prev: prev(superedgev1.PhaseBaking, "new", before(30*time.Second))},
			actionTarget, superedgev1.PhaseDone, "new", t0, time.Time{}},
		{"healthy, baking on another revision: bakes anew", unitView{exists: true, runs: runsTarget, healthy: true, prev: prev(superedgev1.PhaseBaking, "older", before(time.Hour))},
			actionTarget, superedgev1.PhaseBaking, "new", t0, now.Add(30 * time.Second)},
		{"healthy, done: stays done", unitView{exists: true, runs: runsTarget, healthy: true, prev: prev(superedgev1.PhaseDone, "new", before(time.Hour))},
			actionTarget, superedgev1.PhaseDone, "new", t0.Add(-time.Hour), time.Time{}},
		{"unhealthy, new: updates until the deadline", unitView{exists: true, runs: runsTarget}, actionTarget, superedgev1.PhaseUpdating, "new", t0, now.Add(61 * time.Second)},
		{"unhealthy, updating 59s", unitView{exists: true, runs: runsTarget, prev: prev(superedgev1.PhaseUpdating, "new", before(59*time.Second))},
			actionTarget, superedgev1.PhaseUpdating, "new", t0.Add(-59 * time.Second), t0.Add(2 * time.Second)},
		{"unhealthy, updating 61s: failed", unitView{exists: true, runs: runsTarget, prev: prev(superedgev1.PhaseUpdating, "new", before(61*time.Second))},
			actionTarget, superedgev1.PhaseFailed, "new", t0, time.Time{}},
		{"unhealthy, the child reports a failure", unitView{exists: true, runs: runsTarget, failure: "ProgressDeadlineExceeded"},
			actionTarget, superedgev1.PhaseFailed, "new", t0, time.Time{}},
		{"unhealthy, failed before: stays failed", unitView{exists: true, runs: runsTarget, prev: prev(superedgev1.PhaseFailed, "new", before(time.Hour))},
			actionTarget, superedgev1.PhaseFailed, "new", t0.Add(-time.Hour), time.Time{}},
		{"healthy again after a failure: bakes", unitView{exists: true, runs: runsTarget, healthy: true, prev: prev(superedgev1.PhaseFailed, "new", before(time.Hour))},
			actionTarget, superedgev1.PhaseBaking, "new", t0, now.Add(30 * time.Second)},
		{"done, no start time: bakes anew", unitView{exists: true, runs: runsTarget, healthy: true, prev: prev(superedgev1.PhaseDone, "new", nil)},
			actionTarget, superedgev1.PhaseBaking, "new", t0, now.Add(30 * time.Second)},
	} {
		d, wake := observe(tc.u, tmpl, lim, now)
		if d.action != tc.action || d.phase != tc.phase || d.revision != tc.revision || !d.since.Time.Equal(tc.since) || !wake.Equal(tc.wake) {
			t.Errorf("%s: %+v, wake %s; want action %d, phase %s, revision %q, since %s, wake %s",
				tc.name, d, wake, tc.action, tc.phase, tc.revision, tc.since, tc.wake)
		}
	}
	noBake := rolloutLimits{deadline: time.Minute}
	if d, wake := observe(unitView{exists: true, runs: runsTarget, healthy: true}, tmpl, noBake, now); d.phase != superedgev1.PhaseDone || !wake.IsZero() {
		t.Errorf("healthy without bakeSeconds: %+v, wake %s; want Done at once", d, wake)
	}
}

func TestHaltOn(t *testing.T) {
	d := unitDecision{phase: superedgev1.PhaseFailed, revision: "new"}
	h := haltOn(unitView{value: "u1", template: "canary"}, d, time.Minute, t0.Add(time.Second/2))
	want := superedgev1.RolloutHalt{NodeUnit: "u1", Template: "canary", Revision: "new", Reason: "ProgressDeadlineExceeded",
		Message: `nodeunit "u1" did not become healthy within 1m0s on template "canary" revision new`, Time: &t0m}
	if h.NodeUnit != want.NodeUnit || h.Template != want.Template || h.Revision != want.Revision || h.Reason != want.Reason ||
		h.Message != want.Message || !h.Time.Equal(want.Time) {
		t.Errorf("deadline: %+v, want %+v", h, want)
	}
	h = haltOn(unitView{value: "u1", template: "default", failure: "ProgressDeadlineExceeded"}, d, time.Minute, t0)
	if want := `nodeunit "u1": its child reports ProgressDeadlineExceeded on template "default" revision new`; h.Reason != "ProgressDeadlineExceeded" || h.Message != want {
		t.Errorf("child's failure: %+v, want message %q", h, want)
	}
}

func TestStartsOnLastGood(t *testing.T) {
	for _, tc := range []struct {
		u    unitView
		t    templateState
		want bool
	}{
		{unitView{}, tmpl, true},
		{unitView{exists: true}, tmpl, false},
		{unitView{}, templateState{target: "new"}, false}, // no last good yet: the target
	} {
		if got := startsOnLastGood(tc.u, tc.t); got != tc.want {
			t.Errorf("startsOnLastGood(%+v, %+v) = %v, want %v", tc.u, tc.t, got, tc.want)
		}
	}
}

func TestRollsBack(t *testing.T) {
	rollback := &superedgev1.RolloutStrategy{FailurePolicy: superedgev1.FailurePolicyRollback}
	onTarget := unitView{exists: true, runs: runsTarget}
	failed := unitDecision{phase: superedgev1.PhaseFailed}
	for _, tc := range []struct {
		name string
		s    *superedgev1.RolloutStrategy
		u    unitView
		d    unitDecision
		t    templateState
		want bool
	}{
		{"failed", rollback, onTarget, failed, tmpl, true},
		{"updating", rollback, onTarget, unitDecision{phase: superedgev1.PhaseUpdating}, tmpl, true},
		{"baking", rollback, onTarget, unitDecision{phase: superedgev1.PhaseBaking}, tmpl, false},
		{"done", rollback, onTarget, unitDecision{phase: superedgev1.PhaseDone}, tmpl, false},
		{"Halt policy", &superedgev1.RolloutStrategy{}, onTarget, failed, tmpl, false},
		{"no last good", rollback, onTarget, failed, templateState{target: "new"}, false},
		{"last good is the target", rollback, onTarget, failed, templateState{target: "new", lastGood: "new"}, false},
		{"no child", rollback, unitView{runs: runsTarget}, failed, tmpl, false},
		{"not on the target", rollback, unitView{exists: true, runs: runsOther}, failed, tmpl, false},
	} {
		if got := rollsBack(tc.s, tc.u, tc.d, tc.t); got != tc.want {
			t.Errorf("%s: rollsBack = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCurrentWave(t *testing.T) {
	done, waiting := superedgev1.PhaseDone, superedgev1.PhaseWaiting
	for _, tc := range []struct {
		phases         []superedgev1.RolloutPhase // nodeunit i is in wave i/2
		current, total int32
	}{
		{nil, -1, 0},
		{[]superedgev1.RolloutPhase{done, done, done}, -1, 2},
		{[]superedgev1.RolloutPhase{waiting, waiting, waiting}, 0, 2},
		{[]superedgev1.RolloutPhase{done, done, done, waiting, waiting}, 1, 3},
		{[]superedgev1.RolloutPhase{done, done, waiting, done, waiting}, 1, 3},
	} {
		var order []string
		units := map[string]unitDecision{}
		for i, ph := range tc.phases {
			v := fmt.Sprintf("u%d", i)
			order = append(order, v)
			units[v] = unitDecision{phase: ph, wave: int32(i / 2)}
		}
		if current, total := currentWave(order, units); current != tc.current || total != tc.total {
			t.Errorf("%v: currentWave = %d, %d; want %d, %d", tc.phases, current, total, tc.current, tc.total)
		}
	}
}

func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		phase superedgev1.RolloutPhase
		u     unitView
		want  bool
	}{
		{superedgev1.PhaseUpdating, unitView{exists: true, healthy: true}, true},
		{superedgev1.PhaseBaking, unitView{exists: true, healthy: true}, true},
		{superedgev1.PhaseFailed, unitView{exists: true}, true},
		{superedgev1.PhaseWaiting, unitView{exists: true}, true},
		{superedgev1.PhaseWaiting, unitView{exists: true, healthy: true}, false},
		{superedgev1.PhaseWaiting, unitView{}, false},
		{superedgev1.PhaseDone, unitView{exists: true}, false},
		{superedgev1.PhaseRolledBack, unitView{exists: true}, false},
	} {
		if got := unavailable(tc.u, unitDecision{phase: tc.phase}); got != tc.want {
			t.Errorf("%s %+v: unavailable = %v, want %v", tc.phase, tc.u, got, tc.want)
		}
	}
}

func TestWaitsIn(t *testing.T) {
	for _, tc := range []struct {
		d    unitDecision
		want bool
	}{
		{unitDecision{wave: 1, action: actionKeep, phase: superedgev1.PhaseWaiting}, true},
		{unitDecision{wave: 2, action: actionKeep, phase: superedgev1.PhaseWaiting}, false},
		{unitDecision{wave: 1, action: actionLastGood, phase: superedgev1.PhaseWaiting}, false},
		{unitDecision{wave: 1, action: actionKeep, phase: superedgev1.PhaseRolledBack}, false},
	} {
		if got := waitsIn(tc.d, 1); got != tc.want {
			t.Errorf("waitsIn(%+v, 1) = %v, want %v", tc.d, got, tc.want)
		}
	}
}

func TestMayStart(t *testing.T) {
	healthy, unhealthy := unitView{exists: true, healthy: true}, unitView{exists: true}
	for _, tc := range []struct {
		u         unitView
		busy, max int
		want      bool
	}{
		{healthy, 0, 1, true},
		{healthy, 1, 1, false},
		{healthy, 4, 5, true},
		{unhealthy, 1, 1, true},
		{unhealthy, 9, 1, true},
		{unitView{}, 1, 1, false},
	} {
		if got := mayStart(tc.u, tc.busy, tc.max); got != tc.want {
			t.Errorf("mayStart(%+v, busy %d, max %d) = %v, want %v", tc.u, tc.busy, tc.max, got, tc.want)
		}
	}
}

func TestRolloutPhaseAndWave(t *testing.T) {
	halt := &superedgev1.RolloutHalt{}
	for _, tc := range []struct {
		halt           *superedgev1.RolloutHalt
		paused         bool
		current, total int32
		phase          superedgev1.RolloutPhase
		wave           string
	}{
		{nil, false, 0, 3, superedgev1.PhaseProgressing, "1/3"},
		{nil, false, 2, 3, superedgev1.PhaseProgressing, "3/3"},
		{nil, false, -1, 3, superedgev1.PhaseComplete, "3/3"},
		{nil, false, -1, 0, superedgev1.PhaseComplete, "0/0"},
		{nil, true, 1, 3, superedgev1.PhasePaused, "2/3"},
		{nil, true, -1, 3, superedgev1.PhasePaused, "3/3"},
		{halt, true, 1, 3, superedgev1.PhaseHalted, "2/3"},
		{halt, false, -1, 3, superedgev1.PhaseHalted, "3/3"},
	} {
		if got := rolloutPhase(tc.halt, tc.paused, tc.current); got != tc.phase {
			t.Errorf("rolloutPhase(halted %v, paused %v, current %d) = %s, want %s", tc.halt != nil, tc.paused, tc.current, got, tc.phase)
		}
		if got := waveText(tc.current, tc.total); got != tc.wave {
			t.Errorf("waveText(%d, %d) = %q, want %q", tc.current, tc.total, got, tc.wave)
		}
	}
}

func TestTemplatesDoneAndLastGood(t *testing.T) {
	units := []unitView{{value: "a", template: "default"}, {value: "b", template: "default"}, {value: "c", template: "canary"}}
	decisions := map[string]unitDecision{"a": {phase: superedgev1.PhaseDone}, "b": {phase: superedgev1.PhaseBaking}, "c": {phase: superedgev1.PhaseDone}}
	templates := map[string]templateState{"default": tmpl, "canary": tmpl, "unused": tmpl}
	done := templatesDone(units, decisions, templates)
	if len(done) != 3 || done["default"] || !done["canary"] || !done["unused"] {
		t.Errorf("templatesDone = %v, want default false, canary and unused true", done)
	}
	for _, tc := range []struct {
		allDone, halted bool
		t               templateState
		want            bool
	}{
		{true, false, tmpl, true},
		{false, false, tmpl, false},
		{true, true, tmpl, false},
		{true, false, templateState{target: "new", lastGood: "new"}, false},
		{true, false, templateState{target: "new"}, true},
	} {
		if got := becomesLastGood(tc.allDone, tc.halted, tc.t); got != tc.want {
			t.Errorf("becomesLastGood(done %v, halted %v, %+v) = %v, want %v", tc.allDone, tc.halted, tc.t, got, tc.want)
		}
	}
}

func TestWaveSize(t *testing.T) {
	for _, tc := range []struct {
		size *intstr.IntOrString
		n    int
		want int
	}{
		{nil, 10, 10},
		{nil, 0, 1},
		{ptr.To(intstr.FromInt32(3)), 10, 3},
		{ptr.To(intstr.FromInt32(0)), 10, 10},
		{ptr.To(intstr.FromInt32(30)), 10, 30},
		{ptr.To(intstr.FromString("25%")), 10, 3}, // rounded up
		{ptr.To(intstr.FromString("1%")), 10, 1},
		{ptr.To(intstr.FromString("0%")), 10, 10},
		{ptr.To(intstr.FromString("half")), 10, 10},
	} {
		if got := waveSize(&superedgev1.RolloutStrategy{WaveSize: tc.size}, tc.n); got != tc.want {
			t.Errorf("waveSize(%v, %d) = %d, want %d", tc.size, tc.n, got, tc.want)
		}
	}
}

func TestIsCanary(t *testing.T) {
	s := &superedgev1.RolloutStrategy{Canary: &superedgev1.RolloutCanary{NodeUnits: []string{"u1"}, Selector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"u2", "u3"}}}}}}
	empty := &superedgev1.RolloutStrategy{Canary: &superedgev1.RolloutCanary{Selector: &metav1.LabelSelector{}}}
	bad := &superedgev1.RolloutStrategy{Canary: &superedgev1.RolloutCanary{Selector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Near"}}}}}
	for _, tc := range []struct {
		s     *superedgev1.RolloutStrategy
		value string
		want  bool
	}{
		{s, "u1", true},
		{s, "u2", true},
		{s, "u4", false},
		{&superedgev1.RolloutStrategy{}, "u1", false},
		{empty, "u1", false}, // an empty selector selects no canary
		{bad, "u1", false},   // nor does one that does not parse
	} {
		if got := isCanary(tc.s, canarySelector(tc.s), "zone", tc.value); got != tc.want {
			t.Errorf("isCanary(%+v, %q) = %v, want %v", tc.s.Canary, tc.value, got, tc.want)
		}
	}
}
