package watchcache

import (
	"errors"
	"slices"
)

// seedWindow maps the resourceVersions of a previous process, for which a
// snapshot holds exactly this store's start state, to the store's start.
// A watch resuming from one of them continues with this process's events;
// every other version of the previous process stays unknown (410 Expired).
type seedWindow struct {
	from, at uint64 // the previous process's versions, inclusive
	start    uint64 // this process's version of the same state
}

func (w seedWindow) mapLocked(rv uint64) uint64 {
	if w.at != 0 && rv >= w.from && rv <= w.at {
		return w.start
	}
	return rv
}

// Seed fills an unused store with a snapshot's objects, served with the
// resourceVersions they had, without events. The writing process served
// exactly these objects at every version in [from, at]. Until a Set or
// Delete confirms a seeded key, DropSeeded removes it.
func (s *Store) Seed(objs map[string]Object, from, at uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.objects) > 0 || s.lastChange != s.floor {
		return errors.New("seeding a store that already serves objects")
	}
	if from > at || at >= s.clock.Current() {
		return errors.New("snapshot versions are not older than this process's")
	}
	s.seeded = make(map[string]struct{}, len(objs))
	for k, o := range objs {
		s.objects[k] = servedAsIs(o)
		s.seeded[k] = struct{}{}
	}
	s.resume = seedWindow{from: from, at: at, start: s.clock.Current()}
	return nil
}

// DropSeeded deletes (with DELETED events) the seeded objects no Set or
// Delete has confirmed: upstream no longer has them. It returns how many.
func (s *Store) DropSeeded() int {
	s.mu.Lock()
	keys := make([]string, 0, len(s.seeded))
	for k := range s.seeded {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	slices.Sort(keys)
	n := 0
	for _, k := range keys {
		if s.Delete(k) {
			n++
		}
	}
	return n
}

// SnapshotState returns the served objects and the versions [from, at] at
// which exactly these were served: from is the store's last change, at the
// clock now. Both are read under the store's lock, so no change of this
// store falls between them.
func (s *Store) SnapshotState() (objs []Object, from, at uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.listLocked(nil), s.lastChange, s.clock.Current()
}
