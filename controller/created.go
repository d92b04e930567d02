package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// createdChildren remembers the children the controller created until the
// informer shows them. A sync that starts before would find the nodeunit
// without a child and create it again: the create fails (AlreadyExists) and
// the nodeunit is reported as a NameConflict. A burst of new nodeunits syncs
// a grid again as soon as the last sync ends (no status write between them:
// statusdelay.go), sooner than the watch delivers the creates.
type createdChildren[C object] struct {
	mu    sync.Mutex
	byUID map[types.UID]createdChild[C]
}

type createdChild[C object] struct {
	grid cache.ObjectName
	obj  C // as the create returned it; never modified
	at   time.Time
}

// createdKeep bounds how long a created child the informer never showed is
// remembered: one created and deleted before remember ran, whose two
// notifications both came first, would otherwise stand for a child forever.
const createdKeep = time.Minute

// remember records a child created for grid.
func (s *createdChildren[C]) remember(grid cache.ObjectName, obj C, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byUID == nil {
		s.byUID = map[types.UID]createdChild[C]{}
	}
	s.byUID[obj.GetUID()] = createdChild[C]{grid: grid, obj: obj, at: now}
}

// seen: the informer delivered a notification for the child (the cache
// holds it, or held it and it is gone).
func (s *createdChildren[C]) seen(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byUID, uid)
}

// addUncached adds to controlled, by name, grid's created children that
// cached (a lookup of the informer's cache by name) does not show yet, and
// forgets those it shows.
func (s *createdChildren[C]) addUncached(grid cache.ObjectName, controlled map[string]C, cached func(name string) bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, e := range s.byUID {
		switch {
		case now.Sub(e.at) > createdKeep:
			delete(s.byUID, uid)
		case e.grid != grid:
		case cached(e.obj.GetName()):
			delete(s.byUID, uid)
		default:
			if _, ok := controlled[e.obj.GetName()]; !ok {
				controlled[e.obj.GetName()] = e.obj
			}
		}
	}
}

// forgetGrid drops what is remembered for a deleted grid.
func (s *createdChildren[C]) forgetGrid(grid cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, e := range s.byUID {
		if e.grid == grid {
			delete(s.byUID, uid)
		}
	}
}
