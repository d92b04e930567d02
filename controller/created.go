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
	obj  C // as the informer would cache it (Transform); never modified
	at   time.Time
}

// createdKeep bounds how long a created child the informer never showed is
// remembered: one created and deleted before remember ran, whose two
// notifications both came first, would otherwise stand for a child forever.
const createdKeep = time.Minute

// remember records a child created for grid, as the create returned it.
// It is transformed as the informer transforms what it caches: the
// up-to-date check reads the synthesised Apply entry (informers.go).
func (s *createdChildren[C]) remember(grid cache.ObjectName, obj C, now time.Time) {
	if t, err := Transform(obj); err == nil {
		if tc, ok := t.(C); ok {
			obj = tc
		}
	}
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

// addUncached adds to controlled, by name, grid's created children it
// lacks: the informer's copy once cached (a lookup of its cache by name)
// shows it, which may have come after controlled was read, else the one
// remembered. One the cache shows is forgotten.
func (s *createdChildren[C]) addUncached(grid cache.ObjectName, controlled map[string]C, cached func(name string) (C, bool), now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, e := range s.byUID {
		if now.Sub(e.at) > createdKeep {
			delete(s.byUID, uid)
			continue
		}
		if e.grid != grid {
			continue
		}
		name := e.obj.GetName()
		got, inCache := cached(name)
		if inCache {
			delete(s.byUID, uid)
		}
		if _, ok := controlled[name]; ok {
			continue
		}
		switch {
		case !inCache:
			controlled[name] = e.obj
		case got.GetUID() == uid:
			controlled[name] = got
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
