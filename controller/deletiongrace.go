package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// DefaultDeletionGracePeriod is how long a nodeunit must have had no nodes
// before its child is deleted: long enough to survive a bad relabelling run
// or a typo'd gridUniqKey being fixed.
const DefaultDeletionGracePeriod = 5 * time.Minute

// deletionGrace remembers since when each child's nodeunit has had no nodes.
// It lives in memory: after a restart the grace period starts over, which
// only ever delays a deletion.
type deletionGrace struct {
	period time.Duration
	clock  clock.Clock

	mu    sync.Mutex
	since map[types.UID]goneSince
}

type goneSince struct {
	grid cache.ObjectName
	at   time.Time
}

func newDeletionGrace(period time.Duration, clk clock.Clock) *deletionGrace {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &deletionGrace{period: period, clock: clk, since: map[types.UID]goneSince{}}
}

// mark records that the child's nodeunit has no nodes (if not yet recorded)
// and returns when the child may be deleted; first is true on the first mark.
func (g *deletionGrace) mark(grid cache.ObjectName, uid types.UID) (deadline time.Time, first bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.since[uid]
	if !ok {
		s = goneSince{grid: grid, at: g.clock.Now()}
		g.since[uid] = s
	}
	return s.at.Add(g.period), !ok
}

// clear forgets a child; it reports whether a deletion was pending.
func (g *deletionGrace) clear(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.since[uid]
	delete(g.since, uid)
	return ok
}

// forgetGrid drops every record of a deleted grid.
func (g *deletionGrace) forgetGrid(grid cache.ObjectName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for uid, s := range g.since {
		if s.grid == grid {
			delete(g.since, uid)
		}
	}
}
