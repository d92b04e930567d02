package watchcache

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/servicegroup/servicegroup/wrapper/snapshot"
)

// Object is what a Store serves: a typed API object. It is package
// snapshot's type, so a decoded snapshot's objects seed the stores as they
// are.
type Object = snapshot.Object

// Event is one change of a served object. Object is the served form at RV (the
// last served form for DELETED). Prev is the form a MODIFIED replaced, kept
// only when its labels or selectable fields differ (a selector may then see
// the object enter or leave); nil means the selection is Object's. Served
// forms are immutable and shared, so an event in the log holds no copy of
// its own: what Watch and Next hand out carries RV on a copy of the
// object's top-level struct (stamp).
type Event struct {
	Type   watch.EventType
	Object Object
	Prev   Object
	RV     uint64
	size   int64 // encoded bytes the log charges for this event
}

// LogLimits bound a Store's event log by the encoded size of the objects it
// holds (protobuf bytes), not by a count of events of any size.
type LogLimits struct {
	// Bytes is the resume window: the newest events up to this size are
	// kept for watches that resume from a resourceVersion.
	Bytes int64
	// MaxLagBytes is how far a live watcher may fall behind: beyond the
	// resume window the log keeps what live watchers have not read, up to
	// this size; a watcher behind that gets 410 Expired and relists.
	MaxLagBytes int64
}

// objectSize is the protobuf-encoded size of o, which every served type
// reports cheaply; it stands for the memory an event pins.
func objectSize(o Object) int64 {
	if s, ok := o.(interface{ Size() int }); ok {
		return int64(s.Size())
	}
	return 1024
}

// Predicate selects the objects a list or watch asked for.
type Predicate func(Object) bool

// VersionError is returned for a resourceVersion a watch cannot resume
// from: older than the log keeps (TooOld: the client gets 410 Gone and
// relists) or newer than the store has seen (Bound is then its version).
type VersionError struct {
	RV, Bound uint64
	TooOld    bool
}

func (e *VersionError) Error() string {
	if e.TooOld {
		return fmt.Sprintf("too old resource version: %d (%d)", e.RV, e.Bound)
	}
	return fmt.Sprintf("too large resource version: %d, current: %d", e.RV, e.Bound)
}

// Store holds the served form of every object of one resource and a log of
// recent events that watchers read by cursor. The log keeps the newest
// limits.Bytes of events for resuming watches, and beyond that every event a
// live watcher has not read yet, up to limits.MaxLagBytes: a watcher reading
// at full speed is never cut off by a burst, and one that stops reading is
// ended by its write deadline (serveWatch), which releases what it pinned.
type Store struct {
	resource string
	clock    *Clock
	newEmpty func() Object
	fieldsOf func(Object) fields.Set // selectable fields; nil: none
	limits   LogLimits

	mu       sync.RWMutex
	objects  map[string]served
	log      []Event // ascending RV; log[0] is the oldest event kept
	logBytes int64   // sum of the log's event sizes
	floor    uint64  // every event with RV > floor is in the log
	watchers map[*Watcher]struct{}
	notify   chan struct{} // closed (and replaced) on every new event or bookmark

	// fresh is closed when a mirror's clock moves while a list waits for
	// a version (mirror.go: WaitFresh); nil while none waits.
	fresh chan struct{}

	// Seeding from a snapshot (seed.go).
	lastChange uint64              // RV of the last event (the start before any)
	seeded     map[string]struct{} // keys seeded from a snapshot that no Set or Delete has confirmed yet
	resume     seedWindow          // the previous process's versions this store's start state equals
}

// NewStore creates a store whose event log is bounded by limits. fieldsOf
// returns the fields a field selector can match (nil when there are none).
func NewStore(resource string, clock *Clock, newEmpty func() Object, fieldsOf func(Object) fields.Set, limits LogLimits) *Store {
	limits.MaxLagBytes = max(limits.MaxLagBytes, limits.Bytes)
	return &Store{
		resource: resource,
		clock:    clock,
		newEmpty: newEmpty,
		fieldsOf: fieldsOf,
		limits:   limits,
		objects:  map[string]served{},
		floor:    clock.Current(),
		watchers: map[*Watcher]struct{}{},
		notify:   make(chan struct{}),

		lastChange: clock.Current(),
	}
}

// Watcher is one watch request's position in the store's event log.
type Watcher struct {
	cursor    atomic.Uint64 // RV of the last event handed out
	pred      Predicate
	bookmarks bool
	bookmark  atomic.Bool // a bookmark is due
	stopped   bool
}

func setRV(o Object, rv uint64) { o.SetResourceVersion(strconv.FormatUint(rv, 10)) }

// served is one object of a Store: the served form, which may be shared
// with an informer cache and is never modified, and the resourceVersion it
// is served at. The version is stamped on a copy of the top-level struct
// only when the object is handed out, so the store keeps no copy of what it
// serves unchanged.
type served struct {
	obj Object
	rv  uint64
}

// servedAsIs serves o at the resourceVersion it carries (a snapshot's
// objects, a mirror's objects).
func servedAsIs(o Object) served {
	rv, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return served{obj: o, rv: rv}
}

// stamp returns o as served at rv: a copy of its top-level struct carrying
// rv, sharing everything it points to.
func stamp(o Object, rv uint64) Object {
	c := ShallowCopy(o).(Object)
	setRV(c, rv)
	return c
}

// replaceObjectsLocked makes objs, served at the versions they carry, the
// store's objects.
func (s *Store) replaceObjectsLocked(objs map[string]Object) {
	s.objects = make(map[string]served, len(objs))
	for k, o := range objs {
		s.objects[k] = servedAsIs(o)
	}
}

// sameServedForm reports whether obj serves what old does. Upstream rewrites
// two things on every change of a whole object, also on a change the filter
// took away: an EndpointSlice's generation, and the last-change-trigger-time
// annotation the endpointslice and endpoints controllers write (or drop) with
// every update. A served form that differs from the last one only there is
// unchanged, and kube-proxy gets no event for it (old keeps its annotation;
// the next real change brings the new one).
func sameServedForm(old, obj Object) bool {
	if old == obj {
		return true // the same cached object again (a re-filter of what did not change)
	}
	// Compare with those fields (and the resourceVersion) set to old's, on
	// a copy of obj's top-level struct: obj and old may be shared with an
	// informer cache.
	c := ShallowCopy(obj).(Object)
	c.SetResourceVersion(old.GetResourceVersion())
	c.SetGeneration(old.GetGeneration())
	if differOnlyInTriggerTime(old.GetAnnotations(), obj.GetAnnotations()) {
		c.SetAnnotations(old.GetAnnotations())
	}
	return apiequality.Semantic.DeepEqual(old, c)
}

// differOnlyInTriggerTime reports whether a and b differ, and only in
// corev1.EndpointsLastChangeTriggerTime (changed, added or removed: the
// controllers drop it when a change has no trigger time).
func differOnlyInTriggerTime(a, b map[string]string) bool {
	const key = corev1.EndpointsLastChangeTriggerTime
	va, inA := a[key]
	vb, inB := b[key]
	if inA == inB && va == vb {
		return false
	}
	n := len(a)
	if inA {
		n--
	}
	if inB {
		n++
	}
	if n != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; k != key && (!ok || w != v) {
			return false
		}
	}
	return true
}

// sameSelection reports whether every label and field selector selects a and
// b alike.
func (s *Store) sameSelection(a, b Object) bool {
	if !maps.Equal(a.GetLabels(), b.GetLabels()) {
		return false
	}
	return s.fieldsOf == nil || maps.Equal(s.fieldsOf(a), s.fieldsOf(b))
}

// Set serves obj under key. obj may be shared with an informer cache: the
// store never modifies it, nor may anyone else from now on. Nothing happens
// when the served form is unchanged.
func (s *Store) Set(key string, obj Object) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setLocked(key, obj, 0)
}

// setLocked is Set at version at, or (at 0) at the clock's next version.
func (s *Store) setLocked(key string, obj Object, at uint64) bool {
	delete(s.seeded, key)
	old, exists := s.objects[key]
	if exists && sameServedForm(old.obj, obj) {
		return false
	}
	rv := at
	if rv == 0 {
		rv = s.clock.Next()
	}
	s.objects[key] = served{obj: obj, rv: rv}
	ev := Event{Type: watch.Added, Object: obj, RV: rv, size: objectSize(obj)}
	if exists {
		ev.Type = watch.Modified
		if !s.sameSelection(old.obj, obj) {
			ev.Prev = old.obj
			ev.size += objectSize(old.obj)
		}
	}
	s.recordLocked(ev)
	return true
}

// Delete stops serving key.
func (s *Store) Delete(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(key, 0)
}

// deleteLocked is Delete at version at, or (at 0) at the clock's next
// version.
func (s *Store) deleteLocked(key string, at uint64) bool {
	delete(s.seeded, key)
	old, exists := s.objects[key]
	if !exists {
		return false
	}
	delete(s.objects, key)
	rv := at
	if rv == 0 {
		rv = s.clock.Next()
	}
	// The last served form, at the deletion's version.
	s.recordLocked(Event{Type: watch.Deleted, Object: old.obj, RV: rv, size: objectSize(old.obj)})
	return true
}

func (s *Store) recordLocked(ev Event) {
	s.lastChange = ev.RV
	s.log = append(s.log, ev)
	s.logBytes += ev.size
	s.trimLocked()
	close(s.notify)
	s.notify = make(chan struct{})
}

// trimLocked drops the oldest events that neither the resume window nor a
// live watcher needs, and any beyond MaxLagBytes: a watcher still behind
// them gets 410 Expired on its next read.
func (s *Store) trimLocked() {
	oldestNeeded := s.clock.Current()
	for w := range s.watchers {
		oldestNeeded = min(oldestNeeded, w.cursor.Load())
	}
	drop := 0
	for drop < len(s.log) {
		if s.logBytes <= s.limits.Bytes || (s.logBytes <= s.limits.MaxLagBytes && s.log[drop].RV > oldestNeeded) {
			break
		}
		s.logBytes -= s.log[drop].size
		drop++
	}
	if drop == 0 {
		return
	}
	s.floor = s.log[drop-1].RV
	clear(s.log[:drop]) // release the objects; append reallocates past the dead prefix
	s.log = s.log[drop:]
}

// translate turns a store event into what a watcher with pred sees: an object
// entering its selection is ADDED, one leaving it is DELETED. The event's
// object is stamped with its version, on a copy the watcher owns.
func translate(ev Event, pred Predicate) (Event, bool) {
	typ, obj := ev.Type, ev.Object
	if pred != nil {
		switch {
		case ev.Type == watch.Modified && ev.Prev != nil:
			cur, prev := pred(ev.Object), pred(ev.Prev)
			switch {
			case cur && !prev:
				typ = watch.Added
			case prev && !cur:
				typ, obj = watch.Deleted, ev.Prev
			case !cur && !prev:
				return Event{}, false
			}
		case !pred(ev.Object): // the selection did not change
			return Event{}, false
		}
	}
	return Event{Type: typ, Object: stamp(obj, ev.RV), RV: ev.RV}, true
}

// List returns the served objects selected by pred, ordered by key, and the
// resourceVersion they are current at.
func (s *Store) List(pred Predicate) ([]Object, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.listLocked(pred), s.clock.Current()
}

func (s *Store) listLocked(pred Predicate) []Object {
	sel := s.selectLocked(pred)
	out := make([]Object, len(sel))
	for i, o := range sel {
		out[i] = stamp(o.obj, o.rv)
	}
	return out
}

// selectLocked returns the objects selected by pred, ordered by key.
func (s *Store) selectLocked(pred Predicate) []served {
	keys := make([]string, 0, len(s.objects))
	for k, o := range s.objects {
		if pred == nil || pred(o.obj) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]served, len(keys))
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
	if !ok {
		return nil, false
	}
	return stamp(o.obj, o.rv), true
}

// Current returns the version the store's objects are current at.
func (s *Store) Current() uint64 { return s.clock.Current() }

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
}

// Watch registers a watcher. initial holds the events to send first (state,
// replay, watch-list bookmark); Next returns the rest.
func (s *Store) Watch(opts WatchOptions) (initial []Event, w *Watcher, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.clock.Current()
	switch opts.Mode {
	case FromState:
		if opts.RV > cur {
			return nil, nil, &VersionError{RV: opts.RV, Bound: cur}
		}
		for _, o := range s.selectLocked(opts.Pred) {
			initial = append(initial, Event{Type: watch.Added, Object: stamp(o.obj, o.rv), RV: o.rv})
		}
		if opts.InitialEventsEnd {
			bm := s.newEmpty()
			setRV(bm, cur)
			bm.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			initial = append(initial, Event{Type: watch.Bookmark, Object: bm, RV: cur})
		}
	case FromVersion:
		opts.RV = s.resume.mapLocked(opts.RV)
		if opts.RV < s.floor {
			return nil, nil, &VersionError{RV: opts.RV, Bound: s.floor, TooOld: true}
		}
		if opts.RV > cur {
			if !s.clock.mirror {
				return nil, nil, &VersionError{RV: opts.RV, Bound: cur}
			}
			cur = opts.RV // a mirror's source was read further elsewhere (mirror.go)
		}
		for _, ev := range s.log {
			if ev.RV <= opts.RV {
				continue
			}
			if out, ok := translate(ev, opts.Pred); ok {
				initial = append(initial, out)
			}
		}
	}
	w = &Watcher{pred: opts.Pred, bookmarks: opts.Bookmarks}
	w.cursor.Store(cur)
	s.watchers[w] = struct{}{}
	watchersGauge.WithLabelValues(s.resource).Inc()
	return initial, w, nil
}

// Next appends to buf up to limit events after w's cursor (as w sees them,
// with a BOOKMARK last when one is due) and advances the cursor. With none
// pending it returns the channel that is closed when there may be more. A
// watcher that fell off the log gets a too-old VersionError: the client relists.
func (s *Store) Next(w *Watcher, buf []Event, limit int) ([]Event, <-chan struct{}, error) {
	s.mu.RLock()
	cursor := w.cursor.Load()
	if cursor < s.floor {
		s.mu.RUnlock()
		return buf, nil, &VersionError{RV: cursor, Bound: s.floor, TooOld: true}
	}
	i, _ := slices.BinarySearchFunc(s.log, cursor+1, func(ev Event, rv uint64) int { return cmp.Compare(ev.RV, rv) })
	raw := s.log[i:min(len(s.log), i+limit)]
	pending := make([]Event, len(raw))
	copy(pending, raw)
	notify := s.notify
	if len(pending) > 0 {
		w.cursor.Store(pending[len(pending)-1].RV)
	}
	cur := max(s.clock.Current(), w.cursor.Load()) // a watcher of a mirror may start ahead (mirror.go)
	s.mu.RUnlock()

	for _, ev := range pending {
		if out, ok := translate(ev, w.pred); ok {
			buf = append(buf, out)
		}
	}
	if len(pending) < limit && w.bookmarks && w.bookmark.Swap(false) {
		bm := s.newEmpty()
		setRV(bm, cur)
		buf = append(buf, Event{Type: watch.Bookmark, Object: bm, RV: cur})
	}
	if len(pending) > 0 || len(buf) > 0 {
		return buf, nil, nil
	}
	return buf, notify, nil
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
	watchersGauge.WithLabelValues(s.resource).Dec()
	s.trimLocked()
}

// Bookmark makes a BOOKMARK at the then current version due for every
// watcher that asked for bookmarks.
func (s *Store) Bookmark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.watchers) == 0 {
		return
	}
	for w := range s.watchers {
		if w.bookmarks {
			w.bookmark.Store(true)
		}
	}
	close(s.notify)
	s.notify = make(chan struct{})
}

// LogBytes returns the encoded size of the events the log holds.
func (s *Store) LogBytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.logBytes
}

// Watchers returns the number of registered watchers.
func (s *Store) Watchers() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.watchers)
}

// ShallowCopy copies the top-level struct of o, sharing everything it points
// to: the store can stamp a resourceVersion, or an encoder set TypeMeta,
// without writing to an object shared between watchers (or with an
// informer cache).
func ShallowCopy(o runtime.Object) runtime.Object {
	v := reflect.ValueOf(o).Elem()
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return c.Interface().(runtime.Object)
}
