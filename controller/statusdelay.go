package controller

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// DefaultGridStatusDelay is how long a grid's status change that no sync
// decides from waits for later ones before it is written.
const DefaultGridStatusDelay = time.Second

// statusDelay holds back the status writes a burst of changes would make
// once per sync. A grid's status lists every nodeunit, so at 1,000 nodeunits
// each write is a full update of a large object (0.3-2.3 s at full size,
// docs/benchmarks/fleet-scale.md) and a grid's next children wait behind it:
// the workqueue syncs a grid once at a time.
//
// Only a foldable change is held (gridKind.foldable: counts, the children's
// states and readiness, the Ready condition): the rollout's memory and the
// other conditions are written by the sync that decides them, so a sync that
// starts while a change is held decides exactly as if it had been written.
// The write stays in a sync, the grid's only writer, so it stays conditional
// on the version the sync read and starts the next sync from what it wrote
// (statusWrites). The first sync of a burst cannot tell more is coming, so a
// held change waits a fixed delay from the first one, not until the grid is
// quiet: one write per grid per delay, at most that long after any change.
type statusDelay struct {
	delay time.Duration
	mu    sync.Mutex
	// since is when each grid's oldest held change was found.
	since map[cache.ObjectName]time.Time
}

// hold says whether a foldable change found at now waits, and if so after
// how long the grid must be synced again to write it: when the oldest held
// change is due. Every sync that holds asks for that sync itself. The
// workqueue keeps only the earliest of a key's delayed adds, and that one
// may have been asked for by a change a write has taken since: it comes
// before this change is due, holds it again, and must ask again, or the
// change is never written.
func (d *statusDelay) hold(key cache.ObjectName, now time.Time) (wait bool, syncAfter time.Duration) {
	if d.delay <= 0 {
		return false, 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	first, held := d.since[key]
	if !held {
		if d.since == nil {
			d.since = map[cache.ObjectName]time.Time{}
		}
		d.since[key] = now
		return true, d.delay
	}
	if due := first.Add(d.delay); now.Before(due) {
		return true, due.Sub(now)
	}
	return false, 0
}

// held is hold for a change found now; one that waits asks queue for the
// sync that writes it.
func (d *statusDelay) held(key cache.ObjectName, now time.Time, queue interface {
	AddAfter(cache.ObjectName, time.Duration)
}) bool {
	wait, after := d.hold(key, now)
	if wait {
		queue.AddAfter(key, after)
	}
	return wait
}

// done: the grid's status holds every change found so far (written, or
// nothing to write), or the grid is gone.
func (d *statusDelay) done(key cache.ObjectName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.since, key)
}

// foldableWorkloadStatus: next differs from old only in what no sync decides
// from. The rollout reads status.rollout and each unit's revision, phase and
// since (rollout_sync.go, rollout_rules.go); a sync's Warning Events compare
// the Reconciled condition; the other conditions carry the observed
// generation.
func foldableWorkloadStatus(old, next *superedgev1.WorkloadGridStatusCommon) bool {
	return statusEqual(old.Rollout, next.Rollout) &&
		statusEqual(withoutReady(old.Conditions), withoutReady(next.Conditions)) &&
		statusEqual(unitRollouts(old.Units), unitRollouts(next.Units))
}

func withoutReady(conds []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conds))
	for _, c := range conds {
		if c.Type != superedgev1.ConditionReady {
			out = append(out, c)
		}
	}
	return out
}

// unitRollout is the part of a unit's status line the rollout remembers.
// (Exported fields: the semantic comparison calls metav1.Time's equality.)
type unitRollout struct {
	Revision string
	Phase    superedgev1.RolloutPhase
	Wave     *int32
	Since    *metav1.Time
}

// unitRollouts are the units' rollout lines; a unit without one is absent,
// as a unit without a status line is.
func unitRollouts(units []superedgev1.NodeUnitStatus) map[string]unitRollout {
	out := map[string]unitRollout{}
	for _, u := range units {
		r := unitRollout{Revision: u.Revision, Phase: u.Phase, Wave: u.Wave, Since: u.Since}
		if r != (unitRollout{}) {
			out[u.Name] = r
		}
	}
	return out
}
