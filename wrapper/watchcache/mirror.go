package watchcache

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// A mirror store copies a source that serves list and watch at versions of
// its own (an apiserver, or a wrapper that mirrors one): it holds the
// source's objects at the source's resourceVersions, and its clock stands at
// the source's version. ReplaceAt, ApplyAt and ProgressTo feed it, from one
// goroutine at a time (the source's list and watch); Set and Delete, which
// take versions of the store's own clock, are not for it.
//
// Two stores that mirror the same source speak the same versions, so a
// client can move between them and resume where it was. A watch may even
// resume from a version the store has not reached yet (its client read
// further from the source itself): every event up to it the client has, and
// every later one comes through this store, in the source's order.

// NewMirrorStore makes an empty mirror store; see NewStore.
func NewMirrorStore(resource string, newEmpty func() Object, fieldsOf func(Object) fields.Set, limits LogLimits) *Store {
	return NewStore(resource, NewMirrorClock(), newEmpty, fieldsOf, limits)
}

// ReplaceAt makes objs the store's state at the source's version rv (a
// list), with an empty log: watchers still open are told to relist (410
// Expired), as by an apiserver that lost its watch cache. The clock moves to
// rv even when that is back: a relist starts the mirror's history over.
func (s *Store) ReplaceAt(objs map[string]Object, rv uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replaceObjectsLocked(objs)
	clear(s.log)
	s.log = nil
	s.logBytes = 0
	s.seeded = nil
	s.followLocked(rv)
	s.floor, s.lastChange = rv, rv
	for w := range s.watchers {
		w.cursor.Store(0) // below the floor: 410 on its next read
	}
	close(s.notify)
	s.notify = make(chan struct{})
}

// ApplyAt records the source's event at its version rv. Versions the store
// has passed are ignored: a re-watch replays nothing twice. An event that
// changes nothing served still moves the clock.
func (s *Store) ApplyAt(typ watch.EventType, key string, obj Object, rv uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rv <= s.clock.Current() {
		return
	}
	s.followLocked(rv)
	switch typ {
	case watch.Added, watch.Modified:
		s.setLocked(key, obj, rv)
	case watch.Deleted:
		s.deleteLocked(key, rv)
	}
}

// ProgressTo moves the store's version up to the source's rv (a BOOKMARK
// of the source).
func (s *Store) ProgressTo(rv uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rv > s.clock.Current() {
		s.followLocked(rv)
	}
}

// followLocked moves the clock to the source's rv and wakes the lists
// waiting for a version (WaitFresh).
func (s *Store) followLocked(rv uint64) {
	s.clock.follow(rv)
	if s.fresh != nil {
		close(s.fresh)
		s.fresh = nil
	}
}

// WaitFresh waits, within at most, until the store has reached its
// source's version rv, as kube-apiserver's watch cache waits before it
// answers a list at a version it has not seen; false when it has not (or
// ctx ended first).
func (s *Store) WaitFresh(ctx context.Context, rv uint64, within time.Duration) bool {
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		if s.clock.Current() >= rv {
			s.mu.Unlock()
			return true
		}
		if s.fresh == nil {
			s.fresh = make(chan struct{})
		}
		moved := s.fresh
		s.mu.Unlock()
		select {
		case <-moved:
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
