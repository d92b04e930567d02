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

// fleet is n healthy nodeunits u00..u{n-1} on the last good template "old".
func fleet(n int) ([]unitView, map[string]templateState) {
	var units []unitView
	for i := range n {
		units = append(units, unitView{value: fmt.Sprintf("u%02d", i), template: "default", exists: true, runs: runsLastGood, healthy: true})
	}
	return units, map[string]templateState{"default": {target: "new", lastGood: "old", targetJSON: []byte(`{}`)}}
}

// changes lists the nodeunits whose child the plan writes: to the target
// template (a) or back to the last good one.
func changes(p rolloutPlan, units []unitView, a unitAction) []string {
	var out []string
	for _, u := range units {
		d := p.units[u.value]
		switch {
		case d.action == actionTarget && a == actionTarget && (!u.exists || u.runs != runsTarget):
			out = append(out, u.value)
		case d.action == actionLastGood && a == actionLastGood && (!u.exists || u.runs != runsLastGood):
			out = append(out, u.value)
		}
	}
	return out
}

func TestRolloutWaves(t *testing.T) {
	units, tmpl := fleet(10)
	s := &superedgev1.RolloutStrategy{
		Canary: &superedgev1.RolloutCanary{NodeUnits: []string{"u07"}, Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"u03"}}}}},
		WaveSize:            ptr.To(intstr.FromString("50%")),
		MaxUnavailableUnits: ptr.To[int32](5),
	}
	now := time.Now()
	p := planRollout(s, "zone", now, units, tmpl, nil)
	if got := fmt.Sprint(changes(p, units, actionTarget)); got != "[u03 u07]" {
		t.Fatalf("first wave changes %s, want the canary [u03 u07]", got)
	}
	if p.units["u00"].wave != 1 || p.units["u06"].wave != 2 || p.status.Wave != "1/3" || p.status.Phase != superedgev1.PhaseProgressing {
		t.Fatalf("waves: u00 %d, u06 %d, status %+v", p.units["u00"].wave, p.units["u06"].wave, p.status)
	}

	// The canary is healthy on the target: the next wave starts, at most
	// maxUnavailableUnits at once.
	for i := range units {
		if units[i].value == "u03" || units[i].value == "u07" {
			units[i].runs = runsTarget
		}
	}
	p = planRollout(s, "zone", now, units, tmpl, nil)
	if got := fmt.Sprint(changes(p, units, actionTarget)); got != "[u00 u01 u02 u04]" {
		t.Fatalf("second wave changes %s", got)
	}
	// Same again with only two slots: one unit of the wave is unhealthy anyway.
	s.MaxUnavailableUnits = ptr.To[int32](2)
	units[0].healthy = false
	p = planRollout(s, "zone", now, units, tmpl, nil)
	if got := fmt.Sprint(changes(p, units, actionTarget)); got != "[u00 u01]" {
		t.Fatalf("with 2 slots and u00 unhealthy, changes %s", got)
	}
}

func TestRolloutHaltsAndRollsBack(t *testing.T) {
	units, tmpl := fleet(4)
	s := &superedgev1.RolloutStrategy{Canary: &superedgev1.RolloutCanary{NodeUnits: []string{"u00"}}, ProgressDeadlineSeconds: ptr.To[int32](60)}
	start := time.Now()
	units[0].runs, units[0].healthy = runsTarget, false
	p := planRollout(s, "zone", start, units, tmpl, nil)
	if p.units["u00"].phase != superedgev1.PhaseUpdating || p.requeue <= 0 {
		t.Fatalf("canary: %+v, requeue %s", p.units["u00"], p.requeue)
	}
	units[0].prev = unitStatus(child[*metav1.PartialObjectMetadata]{unit: unit{value: "u00"}, rollout: ptr.To(p.units["u00"])}, false)

	// Past the deadline: halted, nothing else touched.
	p = planRollout(s, "zone", start.Add(2*time.Minute), units, tmpl, &p.status)
	if p.halted == nil || p.halted.NodeUnit != "u00" || p.status.Phase != superedgev1.PhaseHalted {
		t.Fatalf("not halted on u00: %+v", p.status)
	}
	if got := changes(p, units, actionTarget); len(got) != 0 {
		t.Fatalf("halted rollout still changes %v", got)
	}
	// A new nodeunit gets the last good template while halted.
	units = append(units, unitView{value: "u09", template: "default"})
	p2 := planRollout(s, "zone", start.Add(3*time.Minute), units, tmpl, &p.status)
	if d := p2.units["u09"]; d.action != actionLastGood || p2.halted != nil || p2.status.Halted == nil {
		t.Fatalf("new nodeunit while halted: %+v, halt %+v", d, p2.status.Halted)
	}
	// With the Rollback policy the failed canary gets the last good template.
	s.FailurePolicy = superedgev1.FailurePolicyRollback
	p3 := planRollout(s, "zone", start.Add(3*time.Minute), units, tmpl, &p.status)
	if d := p3.units["u00"]; d.action != actionLastGood || d.phase != superedgev1.PhaseRolledBack {
		t.Fatalf("rollback: %+v", d)
	}
	// A new template revision clears the halt.
	tmpl["default"] = templateState{target: "newer", lastGood: "old", targetJSON: []byte(`{"a":1}`)}
	units[0].runs = runsOther
	p4 := planRollout(s, "zone", start.Add(4*time.Minute), units, tmpl, &p.status)
	if p4.status.Halted != nil || fmt.Sprint(changes(p4, units, actionTarget)) != "[u00 u09]" {
		t.Fatalf("after a fix: halt %+v, changes %v", p4.status.Halted, changes(p4, units, actionTarget))
	}
}

func TestRolloutPausedBakeAndComplete(t *testing.T) {
	units, tmpl := fleet(2)
	s := &superedgev1.RolloutStrategy{Paused: true, BakeSeconds: 30}
	now := time.Now()
	p := planRollout(s, "zone", now, units, tmpl, nil)
	if len(changes(p, units, actionTarget)) != 0 || p.status.Phase != superedgev1.PhasePaused {
		t.Fatalf("paused: %v %+v", changes(p, units, actionTarget), p.status)
	}
	s.Paused = false
	for i := range units {
		units[i].runs = runsTarget
	}
	p = planRollout(s, "zone", now, units, tmpl, nil)
	if p.units["u00"].phase != superedgev1.PhaseBaking || p.status.Phase != superedgev1.PhaseProgressing {
		t.Fatalf("baking: %+v", p.units["u00"])
	}
	for i := range units {
		units[i].prev = unitStatus(child[*metav1.PartialObjectMetadata]{unit: unit{value: units[i].value}, rollout: ptr.To(p.units[units[i].value])}, true)
	}
	p = planRollout(s, "zone", now.Add(31*time.Second), units, tmpl, &p.status)
	if p.status.Phase != superedgev1.PhaseComplete || p.status.Templates[0].LastGood != "new" {
		t.Fatalf("complete: %+v", p.status)
	}
}
