package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// statusWrites remembers, per grid, the object the controller's last status
// write returned and every resourceVersion it superseded. A sync that starts
// before the informer shows that write reads the grid as the write left it:
// from the cache it would compute the rollout from the status before its own
// last write and meet a conflict (the write's resourceVersion precondition),
// as 11 of 27 status writes of a rollout did at 1,000 nodeunits.
// The chain of superseded versions is contiguous: each write was
// conditional on the version before it, so a cached version outside the
// chain is newer than the last write (someone else's write, or the cache
// caught up) and the entry is dropped.
type statusWrites[G object] struct {
	mu    sync.Mutex
	byKey map[cache.ObjectName]statusWrite[G]
}

type statusWrite[G object] struct {
	uid        types.UID
	superseded map[string]bool // resourceVersions older than after's
	after      G               // as the apiserver returned it; never modified
}

// latest is the grid a sync should start from: the cached one, or the one
// the controller's last status write returned while the cache still holds a
// version that write replaced.
func (s *statusWrites[G]) latest(cached G) G {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := cache.ObjectName{Namespace: cached.GetNamespace(), Name: cached.GetName()}
	e, ok := s.byKey[key]
	if !ok {
		return cached
	}
	if e.uid == cached.GetUID() && e.superseded[cached.GetResourceVersion()] {
		return e.after
	}
	delete(s.byKey, key) // the cache shows the write, or something newer
	return cached
}

// remember records a status write that turned before into after.
func (s *statusWrites[G]) remember(before, after G) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[cache.ObjectName]statusWrite[G]{}
	}
	key := cache.ObjectName{Namespace: after.GetNamespace(), Name: after.GetName()}
	superseded := map[string]bool{}
	if e, ok := s.byKey[key]; ok && e.uid == after.GetUID() && e.after.GetResourceVersion() == before.GetResourceVersion() {
		superseded = e.superseded
	}
	superseded[before.GetResourceVersion()] = true
	s.byKey[key] = statusWrite[G]{uid: after.GetUID(), superseded: superseded, after: after}
}

// forget drops what is remembered of a grid: it is gone, or a write met a
// conflict (the remembered object is no longer the latest).
func (s *statusWrites[G]) forget(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byKey, key)
}
