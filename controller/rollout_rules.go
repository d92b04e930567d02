package controller

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// The rollout's decisions, one function each, in the order planRollout
// takes them (kube-controller-manager's deployment/util states its
// rollout's predicates the same way).

// Defaults of spec.rollout.
const (
	defaultMaxUnavailableUnits     = 1
	defaultProgressDeadlineSeconds = 600
)

// rolloutLimits are spec.rollout's numbers, defaulted.
type rolloutLimits struct {
	// bake is how long a changed nodeunit must stay healthy to be done.
	bake time.Duration
	// deadline is how long a changed nodeunit may take to become healthy.
	deadline time.Duration
	// maxUnavailable is how many nodeunits may be unavailable at once.
	maxUnavailable int
}

func limitsOf(s *superedgev1.RolloutStrategy) rolloutLimits {
	return rolloutLimits{
		bake:           time.Duration(s.BakeSeconds) * time.Second,
		deadline:       progressDeadline(s),
		maxUnavailable: maxUnavailableUnits(s),
	}
}

// progressDeadline is spec.rollout.progressDeadlineSeconds, 600s if unset.
func progressDeadline(s *superedgev1.RolloutStrategy) time.Duration {
	if s.ProgressDeadlineSeconds != nil {
		return time.Duration(*s.ProgressDeadlineSeconds) * time.Second
	}
	return defaultProgressDeadlineSeconds * time.Second
}

// maxUnavailableUnits is spec.rollout.maxUnavailableUnits, 1 if unset or
// not positive.
func maxUnavailableUnits(s *superedgev1.RolloutStrategy) int {
	if s.MaxUnavailableUnits != nil && *s.MaxUnavailableUnits > 0 {
		return int(*s.MaxUnavailableUnits)
	}
	return defaultMaxUnavailableUnits
}

// statusTime is now as the status records it: whole seconds, as the
// apiserver keeps a metav1.Time, so a time read back compares equal.
func statusTime(now time.Time) metav1.Time { return metav1.NewTime(now.Truncate(time.Second)) }

// stillHalted is the halt the last sync recorded, as long as the template it
// halted on still has the revision it halted on: a new revision (a fix, or
// kubectl grid rollout undo) clears it.
func stillHalted(prev *superedgev1.RolloutStatus, templates map[string]templateState) *superedgev1.RolloutHalt {
	if prev == nil || prev.Halted == nil {
		return nil
	}
	if t, ok := templates[prev.Halted.Template]; ok && t.target == prev.Halted.Revision {
		return prev.Halted.DeepCopy()
	}
	return nil
}

// observe is the phase a nodeunit's child shows, and when time alone will
// change it (zero: never): a missing child is created on the target, a
// child on the target is judged by onTarget, any other child waits.
func observe(u unitView, t templateState, lim rolloutLimits, now time.Time) (unitDecision, time.Time) {
	switch {
	case !u.exists:
		return unitDecision{action: actionTarget, phase: superedgev1.PhaseUpdating, since: statusTime(now), revision: t.target}, time.Time{}
	case u.runs == runsTarget:
		return onTarget(u, t, lim, now)
	default:
		return waiting(u, t, statusTime(now)), time.Time{}
	}
}

// onTarget is the phase of a child running the target revision. A phase
// the last sync recorded for this revision continues with its start time;
// healthy children bake, then are done; unhealthy ones update until the
// deadline, or fail at once when the child itself reports a failure.
func onTarget(u unitView, t templateState, lim rolloutLimits, now time.Time) (unitDecision, time.Time) {
	d := unitDecision{action: actionTarget, revision: t.target, since: statusTime(now)}
	var wake time.Time
	switch {
	case u.healthy && continues(u, t, superedgev1.PhaseDone):
		d.phase, d.since = superedgev1.PhaseDone, *u.prev.Since
	case u.healthy && continues(u, t, superedgev1.PhaseBaking):
		if baked(u.prev.Since.Time, lim.bake, now) {
			d.phase = superedgev1.PhaseDone
		} else {
			d.phase, d.since, wake = superedgev1.PhaseBaking, *u.prev.Since, u.prev.Since.Add(lim.bake)
		}
	case u.healthy && lim.bake == 0:
		d.phase = superedgev1.PhaseDone
	case u.healthy:
		d.phase, wake = superedgev1.PhaseBaking, now.Add(lim.bake)
	case continues(u, t, superedgev1.PhaseFailed):
		d.phase, d.since = superedgev1.PhaseFailed, *u.prev.Since
	case u.failure != "":
		d.phase = superedgev1.PhaseFailed
	case continues(u, t, superedgev1.PhaseUpdating):
		if timedOut(u.prev.Since.Time, lim.deadline, now) {
			d.phase = superedgev1.PhaseFailed
		} else {
			d.phase, d.since, wake = superedgev1.PhaseUpdating, *u.prev.Since, u.prev.Since.Add(lim.deadline+time.Second)
		}
	default:
		d.phase, wake = superedgev1.PhaseUpdating, now.Add(lim.deadline+time.Second)
	}
	return d, wake
}

// continues: the last sync recorded phase for u on t's target revision,
// with its start time.
func continues(u unitView, t templateState, phase superedgev1.RolloutPhase) bool {
	return u.prev.Revision == t.target && u.prev.Since != nil && u.prev.Phase == phase
}

// baked: a nodeunit healthy since since has baked for bake.
func baked(since time.Time, bake time.Duration, now time.Time) bool {
	return !now.Before(since.Add(bake))
}

// timedOut: a nodeunit updating since since has passed its deadline.
func timedOut(since time.Time, deadline time.Duration, now time.Time) bool {
	return now.Sub(since) > deadline
}

// waiting is the phase of a child not on the target: it waits for its
// wave, on the last good revision or another; one the rollout rolled back
// stays RolledBack. An unchanged phase keeps its start time.
func waiting(u unitView, t templateState, now metav1.Time) unitDecision {
	d := unitDecision{action: actionKeep, phase: superedgev1.PhaseWaiting, since: now}
	if u.runs == runsLastGood {
		d.revision = t.lastGood
		if u.prev.Phase == superedgev1.PhaseRolledBack {
			d.phase = superedgev1.PhaseRolledBack
		}
	}
	if u.prev.Phase == d.phase && u.prev.Since != nil {
		d.since = *u.prev.Since
	}
	return d
}

// haltOn is the record of a halt on nodeunit u, failed in decision d: the
// reason the child itself gives, or the missed deadline.
func haltOn(u unitView, d unitDecision, deadline time.Duration, now time.Time) *superedgev1.RolloutHalt {
	at := statusTime(now)
	h := &superedgev1.RolloutHalt{NodeUnit: u.value, Template: u.template, Revision: d.revision, Time: &at,
		Reason:  "ProgressDeadlineExceeded",
		Message: fmt.Sprintf("nodeunit %q did not become healthy within %s on template %q revision %s", u.value, deadline, u.template, d.revision),
	}
	if u.failure != "" {
		h.Reason = u.failure
		h.Message = fmt.Sprintf("nodeunit %q: its child reports %s on template %q revision %s", u.value, u.failure, u.template, d.revision)
	}
	return h
}

// startsOnLastGood: while the rollout is stopped, a nodeunit without a
// child gets the last good template, when there is one.
func startsOnLastGood(u unitView, t templateState) bool {
	return !u.exists && t.lastGood != ""
}

// rollsBack: after a halt, with failurePolicy Rollback, a child on the
// target that failed or is still updating gets the last good template back
// (when there is one other than the target).
func rollsBack(s *superedgev1.RolloutStrategy, u unitView, d unitDecision, t templateState) bool {
	return s.FailurePolicy == superedgev1.FailurePolicyRollback && t.lastGood != "" && t.lastGood != t.target &&
		u.exists && u.runs == runsTarget && (d.phase == superedgev1.PhaseFailed || d.phase == superedgev1.PhaseUpdating)
}

// currentWave is the first wave, in order, with a nodeunit not done (-1:
// every nodeunit is done), and how many waves there are.
func currentWave(order []string, units map[string]unitDecision) (current, total int32) {
	current = -1
	for _, v := range order {
		d := units[v]
		total = max(total, d.wave+1)
		if current < 0 && d.phase != superedgev1.PhaseDone {
			current = d.wave
		}
	}
	return current, total
}

// unavailable: the nodeunit counts against maxUnavailableUnits: it is
// changing (updating, baking), failed, or waiting with an unhealthy child.
func unavailable(u unitView, d unitDecision) bool {
	switch d.phase {
	case superedgev1.PhaseUpdating, superedgev1.PhaseBaking, superedgev1.PhaseFailed:
		return true
	case superedgev1.PhaseWaiting:
		return u.exists && !u.healthy
	}
	return false
}

// waitsIn: the nodeunit waits, untouched, in wave.
func waitsIn(d unitDecision, wave int32) bool {
	return d.wave == wave && d.action == actionKeep && d.phase == superedgev1.PhaseWaiting
}

// mayStart: a waiting nodeunit may change now: while fewer than
// maxUnavailable are busy, or at any time when its child is unhealthy anyway
// (changing it makes nothing less available).
func mayStart(u unitView, busy, maxUnavailable int) bool {
	return (u.exists && !u.healthy) || busy < maxUnavailable
}

// rolloutPhase is status.rollout.phase.
func rolloutPhase(halt *superedgev1.RolloutHalt, paused bool, current int32) superedgev1.RolloutPhase {
	switch {
	case halt != nil:
		return superedgev1.PhaseHalted
	case paused:
		return superedgev1.PhasePaused
	case current < 0:
		return superedgev1.PhaseComplete
	default:
		return superedgev1.PhaseProgressing
	}
}

// waveText is status.rollout.wave, "current/total", counting from 1; a
// complete rollout shows its last wave.
func waveText(current, total int32) string {
	shown := current + 1
	if current < 0 {
		shown = total
	}
	return fmt.Sprintf("%d/%d", shown, total)
}

// templatesDone tells, per template, whether every nodeunit using it is done.
func templatesDone(units []unitView, decisions map[string]unitDecision, templates map[string]templateState) map[string]bool {
	done := make(map[string]bool, len(templates))
	for name := range templates {
		done[name] = true
	}
	for _, u := range units {
		if decisions[u.value].phase != superedgev1.PhaseDone {
			done[u.template] = false
		}
	}
	return done
}

// becomesLastGood: a template's target becomes its last good revision once
// every nodeunit using it is done, unless the rollout is halted.
func becomesLastGood(allDone, halted bool, t templateState) bool {
	return allDone && !halted && t.lastGood != t.target
}
