package wrapper

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Object is what a Store serves: a typed API object.
type Object interface {
	runtime.Object
	metav1.Object
}

// Clock hands out the wrapper's resourceVersions. It starts at the process
// start time in nanoseconds, so versions keep increasing across restarts and a
// client resuming with a version of a previous process is told to relist.
type Clock struct{ v atomic.Uint64 }

// NewClock starts a clock at start.
func NewClock(start uint64) *Clock {
	c := &Clock{}
	c.v.Store(start)
	return c
}

// Next returns a new, larger resourceVersion.
func (c *Clock) Next() uint64 { return c.v.Add(1) }

// Current returns the last resourceVersion handed out.
func (c *Clock) Current() uint64 { return c.v.Load() }

// Event is one change of a served object. Object is the served form at RV (the
// last served form for DELETED); Prev is the form it replaced.
type Event struct {
	Type   watch.EventType
	Object Object
	Prev   Object
	RV     uint64
}

// Predicate selects the objects a list or watch asked for.
type Predicate func(Object) bool

// ErrTooOld and ErrTooLarge are returned for resourceVersions a watch cannot
// resume from; the client relists.
type rvError struct {
	rv, bound uint64
	tooOld    bool
}

func (e *rvError) Error() string {
	if e.tooOld {
		return fmt.Sprintf("too old resource version: %d (%d)", e.rv, e.bound)
	}
	return fmt.Sprintf("too large resource version: %d, current: %d", e.rv, e.bound)
}

// Store holds the served form of every object of one resource and a bounded
// log of recent events, and fans events out to watchers.
type Store struct {
	resource string
	clock    *Clock
	newEmpty func() Object

	mu       sync.RWMutex
	objects  map[string]Object
	ring     []Event // circular, len(ring) == capacity
	head, n  int
	floor    uint64 // every event with RV > floor is in the ring
	watchers map[*Watcher]struct{}
	bufSize  int
}

// NewStore creates a store whose event log holds ringSize events and whose
// watchers may fall bufSize events behind before they are cut off.
func NewStore(resource string, clock *Clock, newEmpty func() Object, ringSize, bufSize int) *Store {
	return &Store{
		resource: resource,
		clock:    clock,
		newEmpty: newEmpty,
		objects:  map[string]Object{},
		ring:     make([]Event, ringSize),
		floor:    clock.Current(),
		watchers: map[*Watcher]struct{}{},
		bufSize:  bufSize,
	}
}

// Watcher receives the events of one watch request.
type Watcher struct {
	ch        chan Event
	pred      Predicate
	bookmarks bool
	onCutoff  func()
	stopped   bool
}

// Events delivers events in order; it is closed when the watcher is stopped
// or cut off for falling behind.
func (w *Watcher) Events() <-chan Event { return w.ch }

func setRV(o Object, rv uint64) { o.SetResourceVersion(strconv.FormatUint(rv, 10)) }

// Set serves obj under key. obj must not be modified afterwards. Nothing
// happens when the served form is unchanged.
func (s *Store) Set(key string, obj Object) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.objects[key]
	if exists {
		obj.SetResourceVersion(old.GetResourceVersion())
		if apiequality.Semantic.DeepEqual(old, obj) {
			return false
		}
	}
	rv := s.clock.Next()
	setRV(obj, rv)
	s.objects[key] = obj
	ev := Event{Type: watch.Added, Object: obj, RV: rv}
	if exists {
		ev.Type, ev.Prev = watch.Modified, old
	}
	s.recordLocked(ev)
	return true
}

// Delete stops serving key.
func (s *Store) Delete(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.objects[key]
	if !exists {
		return false
	}
	delete(s.objects, key)
	rv := s.clock.Next()
	gone := old.DeepCopyObject().(Object)
	setRV(gone, rv)
	s.recordLocked(Event{Type: watch.Deleted, Object: gone, Prev: old, RV: rv})
	return true
}

func (s *Store) recordLocked(ev Event) {
	if len(s.ring) > 0 {
		if s.n == len(s.ring) {
			s.floor = s.ring[s.head].RV
			s.ring[s.head] = Event{}
			s.head = (s.head + 1) % len(s.ring)
			s.n--
		}
		s.ring[(s.head+s.n)%len(s.ring)] = ev
		s.n++
	} else {
		s.floor = ev.RV
	}
	for w := range s.watchers {
		if out, ok := translate(ev, w.pred); ok {
			select {
			case w.ch <- out:
			default:
				s.cutoffLocked(w)
			}
		}
	}
}

// translate turns a store event into what a watcher with pred sees: an object
// entering its selection is ADDED, one leaving it is DELETED.
func translate(ev Event, pred Predicate) (Event, bool) {
	if pred == nil {
		return ev, true
	}
	switch ev.Type {
	case watch.Added, watch.Deleted:
		return ev, pred(ev.Object)
	case watch.Modified:
		cur, prev := pred(ev.Object), pred(ev.Prev)
		switch {
		case cur && prev:
			return ev, true
		case cur:
			return Event{Type: watch.Added, Object: ev.Object, RV: ev.RV}, true
		case prev:
			gone := ev.Prev.DeepCopyObject().(Object)
			setRV(gone, ev.RV)
			return Event{Type: watch.Deleted, Object: gone, Prev: ev.Prev, RV: ev.RV}, true
		}
	}
	return Event{}, false
}

func (s *Store) cutoffLocked(w *Watcher) {
	delete(s.watchers, w)
	w.stopped = true
	close(w.ch)
	watchersGauge.WithLabelValues(s.resource).Dec()
	watchersCutOff.WithLabelValues(s.resource).Inc()
	if w.onCutoff != nil {
		go w.onCutoff()
	}
}

// List returns the served objects selected by pred, ordered by key, and the
// resourceVersion they are current at.
func (s *Store) List(pred Predicate) ([]Object, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.listLocked(pred), s.clock.Current()
}

func (s *Store) listLocked(pred Predicate) []Object {
	keys := make([]string, 0, len(s.objects))
	for k, o := range s.objects {
		if pred == nil || pred(o) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]Object, len(keys))
	for i, k := range keys {
		out[i] = s.objects[k]
	}
	return out
}

// Get returns the served object under key.
func (s *Store) Get(key string) (Object, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objects[key]
	return o, ok
}

// Len returns the number of served objects.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.objects)
}

// WatchMode says where a watch starts.
type WatchMode int

const (
	// FromState sends every selected object as ADDED, then changes.
	FromState WatchMode = iota
	// FromVersion replays the changes after a resourceVersion.
	FromVersion
	// FromNow sends only changes made after the watch starts.
	FromNow
)

// WatchOptions describe one watch request.
type WatchOptions struct {
	Mode WatchMode
	// RV is the version to resume from (FromVersion) or the lower bound the
	// state must not be older than (FromState).
	RV uint64
	// InitialEventsEnd ends the initial state with the watch-list BOOKMARK.
	InitialEventsEnd bool
	Bookmarks        bool
	Pred             Predicate
	// OnCutoff runs (in its own goroutine) when the watcher is cut off.
	OnCutoff func()
}

// Watch registers a watcher. initial holds the events to send before the
// watcher's channel (state, replay, watch-list bookmark).
func (s *Store) Watch(opts WatchOptions) (initial []Event, w *Watcher, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.clock.Current()
	switch opts.Mode {
	case FromState:
		if opts.RV > cur {
			return nil, nil, &rvError{rv: opts.RV, bound: cur}
		}
		for _, o := range s.listLocked(opts.Pred) {
			rv, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
			initial = append(initial, Event{Type: watch.Added, Object: o, RV: rv})
		}
		if opts.InitialEventsEnd {
			bm := s.newEmpty()
			setRV(bm, cur)
			bm.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			initial = append(initial, Event{Type: watch.Bookmark, Object: bm, RV: cur})
		}
	case FromVersion:
		if opts.RV < s.floor {
			return nil, nil, &rvError{rv: opts.RV, bound: s.floor, tooOld: true}
		}
		if opts.RV > cur {
			return nil, nil, &rvError{rv: opts.RV, bound: cur}
		}
		for i := 0; i < s.n; i++ {
			ev := s.ring[(s.head+i)%len(s.ring)]
			if ev.RV <= opts.RV {
				continue
			}
			if out, ok := translate(ev, opts.Pred); ok {
				initial = append(initial, out)
			}
		}
	}
	w = &Watcher{ch: make(chan Event, s.bufSize), pred: opts.Pred, bookmarks: opts.Bookmarks, onCutoff: opts.OnCutoff}
	s.watchers[w] = struct{}{}
	watchersGauge.WithLabelValues(s.resource).Inc()
	return initial, w, nil
}

// StopWatch unregisters w; it is safe to call more than once.
func (s *Store) StopWatch(w *Watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	delete(s.watchers, w)
	close(w.ch)
	watchersGauge.WithLabelValues(s.resource).Dec()
}

// Bookmark sends a BOOKMARK at the current version to every watcher that
// asked for bookmarks and has room for it; a bookmark is never worth a cutoff.
func (s *Store) Bookmark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.watchers) == 0 {
		return
	}
	cur := s.clock.Current()
	bm := s.newEmpty()
	setRV(bm, cur)
	for w := range s.watchers {
		if !w.bookmarks {
			continue
		}
		select {
		case w.ch <- Event{Type: watch.Bookmark, Object: bm, RV: cur}:
		default:
		}
	}
}

// Watchers returns the number of registered watchers.
func (s *Store) Watchers() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.watchers)
}

// shallowCopy lets an encoder set the TypeMeta of a served object, which is
// shared between watchers, without writing to the shared object.
func shallowCopy(o runtime.Object) runtime.Object {
	v := reflect.ValueOf(o).Elem()
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return c.Interface().(runtime.Object)
}
