package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// TestStatusDelayHoldsFromTheFirstChange: a grid's first held change asks
// for a sync after the delay; later ones within it ask for one when the
// first is due; from the delay on, the change is written; once written, the
// next change starts a new delay. Grids are apart; a zero delay holds
// nothing.
func TestStatusDelayHoldsFromTheFirstChange(t *testing.T) {
	const delay = time.Second
	d := statusDelay{delay: delay}
	a, b := cache.ObjectName{Namespace: "ns", Name: "a"}, cache.ObjectName{Namespace: "ns", Name: "b"}
	t0 := time.Unix(1000, 0)
	check := func(what string, key cache.ObjectName, at time.Duration, wantWait bool, wantAfter time.Duration) {
		t.Helper()
		if wait, after := d.hold(key, t0.Add(at)); wait != wantWait || after != wantAfter {
			t.Errorf("%s: hold = %v, sync after %s; want %v, %s", what, wait, after, wantWait, wantAfter)
		}
	}
	check("first change", a, 0, true, delay)
	check("a change within the delay", a, delay/2, true, delay/2)
	check("another grid's first change", b, delay/2, true, delay)
	check("the change at the delay", a, delay, false, 0)
	check("still due until written", a, 2*delay, false, 0)
	d.done(a)
	check("the first change after the write", a, 3*delay, true, delay)
	check("the other grid within its delay", b, delay, true, delay/2)

	off := statusDelay{}
	if wait, after := off.hold(a, t0); wait || after != 0 {
		t.Errorf("zero delay: hold = %v, sync after %s; want false, 0", wait, after)
	}
}

// TestHeldStatusChangeIsSyncedWhenDue replays, on a real delaying
// workqueue, what left a grid's status stale for good under load: a sync
// asked for by a change a write took since is the key's only delayed add
// (the queue keeps the earliest), comes before the next held change is due,
// and holds it again. The key must come back when that change is due, and
// not before.
func TestHeldStatusChangeIsSyncedWhenDue(t *testing.T) {
	const delay = time.Second
	key := cache.ObjectName{Namespace: "ns", Name: "grid"}
	t0 := time.Unix(1000, 0)
	clock := testingclock.NewFakeClock(t0)
	q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[cache.ObjectName]{Clock: clock})
	defer q.ShutDown()
	d := statusDelay{delay: delay}
	held := func(what string) {
		t.Helper()
		if !d.held(key, clock.Now(), q) {
			t.Fatalf("%s: not held", what)
		}
		// The queue takes a delayed add in on its own goroutine; real
		// syncs are apart by far more than this.
		time.Sleep(50 * time.Millisecond)
	}
	// The queue's own goroutine moves a due key in; polled in real time.
	queuedWithin := func(wait time.Duration) bool {
		deadline := time.Now().Add(wait)
		for q.Len() == 0 {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(time.Millisecond)
		}
		k, _ := q.Get()
		q.Done(k)
		return true
	}
	at := func() time.Duration { return clock.Now().Sub(t0) }

	held("a first change") // asks for a sync at 1s
	clock.Step(200 * time.Millisecond)
	d.done(key) // a sync wrote the status (a change no sync folds)
	clock.Step(700 * time.Millisecond)
	held("a change at 0.9s") // due at 1.9s; the queue keeps 1s
	clock.Step(100 * time.Millisecond)
	if !queuedWithin(5 * time.Second) {
		t.Fatalf("the sync asked for at 0s is not queued at %s", at())
	}
	held("the change at 0.9s, synced at 1s")
	if queuedWithin(100 * time.Millisecond) {
		t.Errorf("synced again at %s, before the held change is due", at())
	}
	clock.Step(900 * time.Millisecond)
	if !queuedWithin(5 * time.Second) {
		t.Fatalf("the change held since 0.9s is not synced at %s: it would stay unwritten", at())
	}
	if d.held(key, clock.Now(), q) {
		t.Errorf("at %s the change is still held", at())
	}
}

// TestFoldableWorkloadStatus: what no sync decides from may wait (counts,
// the units' children and readiness, new units without rollout lines, the
// Ready condition); the rollout's memory and the other conditions may not.
func TestFoldableWorkloadStatus(t *testing.T) {
	since := metav1.NewTime(time.Unix(2000, 0))
	later := metav1.NewTime(time.Unix(2060, 0))
	cond := func(typ, status, msg string, gen int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: "R", Message: msg, ObservedGeneration: gen, LastTransitionTime: since}
	}
	base := func() *superedgev1.WorkloadGridStatusCommon {
		return &superedgev1.WorkloadGridStatusCommon{
			ReadyNodeUnits: 1,
			Units: []superedgev1.NodeUnitStatus{
				{Name: "a", Child: "g-a", Ready: true, Revision: "r1", Phase: superedgev1.PhaseDone, Wave: ptr.To[int32](0), Since: &since},
				{Name: "b", Child: "g-b"},
			},
			Rollout: &superedgev1.RolloutStatus{Phase: superedgev1.PhaseComplete, Wave: "1/1",
				Templates: []superedgev1.TemplateRevisions{{Name: "default", Target: "r1", LastGood: "r1"}}},
			Conditions: []metav1.Condition{
				cond(superedgev1.ConditionReconciled, "True", "every Deployment is in place", 3),
				cond(superedgev1.ConditionReady, "False", "1/2 ready", 3),
				cond(superedgev1.ConditionConflict, "False", "none", 3),
			},
		}
	}
	for _, tc := range []struct {
		name     string
		change   func(*superedgev1.WorkloadGridStatusCommon)
		foldable bool
	}{
		{"nothing", func(*superedgev1.WorkloadGridStatusCommon) {}, true},
		{"ready count and a unit's readiness", func(s *superedgev1.WorkloadGridStatusCommon) {
			s.ReadyNodeUnits, s.Units[1].Ready = 2, true
		}, true},
		{"Ready condition", func(s *superedgev1.WorkloadGridStatusCommon) {
			s.Conditions[1] = cond(superedgev1.ConditionReady, "True", "2/2 ready", 3)
		}, true},
		{"new unit without a rollout line, a unit's pending action", func(s *superedgev1.WorkloadGridStatusCommon) {
			s.Units = append(s.Units, superedgev1.NodeUnitStatus{Name: "c", Child: "g-c", Template: "default"})
			s.Units[1].Pending = "delete at 12:00"
		}, true},
		{"a unit without a rollout line gone", func(s *superedgev1.WorkloadGridStatusCommon) { s.Units = s.Units[:1] }, true},
		{"Reconciled condition", func(s *superedgev1.WorkloadGridStatusCommon) {
			s.Conditions[0] = cond(superedgev1.ConditionReconciled, "False", "name taken", 3)
		}, false},
		{"observed generation", func(s *superedgev1.WorkloadGridStatusCommon) {
			s.Conditions[2] = cond(superedgev1.ConditionConflict, "False", "none", 4)
		}, false},
		{"a condition added", func(s *superedgev1.WorkloadGridStatusCommon) {
			s.Conditions = append(s.Conditions, cond(superedgev1.ConditionProgressing, "False", "wave 1/1", 3))
		}, false},
		{"rollout phase", func(s *superedgev1.WorkloadGridStatusCommon) { s.Rollout.Phase = superedgev1.PhaseProgressing }, false},
		{"last good revision", func(s *superedgev1.WorkloadGridStatusCommon) { s.Rollout.Templates[0].LastGood = "r0" }, false},
		{"a unit's phase", func(s *superedgev1.WorkloadGridStatusCommon) { s.Units[0].Phase = superedgev1.PhaseBaking }, false},
		{"a unit's since", func(s *superedgev1.WorkloadGridStatusCommon) { s.Units[0].Since = &later }, false},
		{"a unit's revision", func(s *superedgev1.WorkloadGridStatusCommon) { s.Units[0].Revision = "r2" }, false},
		{"a unit's wave", func(s *superedgev1.WorkloadGridStatusCommon) { s.Units[0].Wave = ptr.To[int32](1) }, false},
		{"new unit with a rollout line", func(s *superedgev1.WorkloadGridStatusCommon) {
			s.Units = append(s.Units, superedgev1.NodeUnitStatus{Name: "c", Child: "g-c", Phase: superedgev1.PhaseUpdating, Since: &later})
		}, false},
		{"a unit with a rollout line gone", func(s *superedgev1.WorkloadGridStatusCommon) { s.Units = s.Units[1:] }, false},
	} {
		next := base()
		tc.change(next)
		if got := foldableWorkloadStatus(base(), next); got != tc.foldable {
			t.Errorf("%s: foldable = %v, want %v", tc.name, got, tc.foldable)
		}
	}
}
