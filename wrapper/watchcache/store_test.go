package watchcache

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func svcObj(name string, lbl string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"l": lbl}}}
}

// annotated is a Service whose changes keep its selection (no Prev kept):
// with a three-character value every event has the same size.
func annotated(name, v string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{"a": v}}}
}

// eventSize is the log's charge for one event of annotated(_, 3 chars) at a
// four-digit resourceVersion.
func eventSize() int64 {
	o := annotated("a", "000")
	setRV(o, 1000)
	return objectSize(o)
}

// newTestStore keeps about logEvents events of eventSize() for resuming and
// lets a watcher fall maxLagEvents behind.
func newTestStore(logEvents, maxLagEvents int) *Store {
	return NewStore("services", NewClock(1000, nil), func() Object { return &corev1.Service{} }, nil,
		LogLimits{Bytes: int64(logEvents) * eventSize(), MaxLagBytes: int64(maxLagEvents) * eventSize()})
}

// next reads everything pending for w.
func next(t *testing.T, s *Store, w *Watcher) []Event {
	t.Helper()
	evs, _, err := s.Next(w, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestStoreEventsOnlyOnChange(t *testing.T) {
	s := newTestStore(10, 10)
	_, w, _ := s.Watch(WatchOptions{Mode: FromNow})
	if !s.Set("ns/a", svcObj("a", "x")) || s.Set("ns/a", svcObj("a", "x")) || !s.Set("ns/a", svcObj("a", "y")) || !s.Delete("ns/a") || s.Delete("ns/a") {
		t.Fatal("Set/Delete reported wrong changes")
	}
	var got []watch.EventType
	var rvs []string
	for _, ev := range next(t, s, w) {
		got = append(got, ev.Type)
		rvs = append(rvs, ev.Object.GetResourceVersion())
	}
	if len(got) != 3 || got[0] != watch.Added || got[1] != watch.Modified || got[2] != watch.Deleted || rvs[0] != "1001" || rvs[2] != "1003" {
		t.Fatalf("events %v at %v", got, rvs)
	}
	if evs, wait, _ := s.Next(w, nil, 10); len(evs) != 0 || wait == nil {
		t.Fatalf("nothing pending, yet Next returned %v", evs)
	}
}

func TestStoreResumeAndTooOld(t *testing.T) {
	s := newTestStore(3, 3)
	for _, v := range []string{"001", "002", "003", "004", "005"} {
		s.Set("ns/a", annotated("a", v))
	} // RVs 1001..1005, the log keeps 1003..1005
	initial, w, err := s.Watch(WatchOptions{Mode: FromVersion, RV: 1003})
	if err != nil || len(initial) != 2 || initial[0].RV != 1004 {
		t.Fatalf("resume from 1003: %v %v", initial, err)
	}
	s.StopWatch(w)
	s.StopWatch(w)
	var rvErr *VersionError
	if _, _, err := s.Watch(WatchOptions{Mode: FromVersion, RV: 1001}); !errors.As(err, &rvErr) || !rvErr.TooOld {
		t.Fatalf("resume from evicted version: %v", err)
	}
	if _, _, err := s.Watch(WatchOptions{Mode: FromVersion, RV: 999}); err == nil {
		t.Fatal("resume from a previous process's version succeeded")
	}
	if _, _, err := s.Watch(WatchOptions{Mode: FromVersion, RV: 2000}); !errors.As(err, &rvErr) || rvErr.TooOld {
		t.Fatalf("resume from future version: %v", err)
	}
}

func TestStoreSelectorTransitionsAndWatchList(t *testing.T) {
	s := newTestStore(10, 10)
	s.Set("ns/a", svcObj("a", "in"))
	s.Set("ns/b", svcObj("b", "out"))
	pred := func(o Object) bool { return o.GetLabels()["l"] == "in" }
	initial, w, _ := s.Watch(WatchOptions{Mode: FromState, InitialEventsEnd: true, Pred: pred})
	if len(initial) != 2 || initial[0].Object.GetName() != "a" || initial[1].Type != watch.Bookmark ||
		initial[1].Object.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("watch-list initial events: %+v", initial)
	}
	s.Set("ns/a", svcObj("a", "out"))
	s.Set("ns/b", svcObj("b", "in"))
	evs := next(t, s, w)
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	if ev := evs[0]; ev.Type != watch.Deleted || ev.Object.GetName() != "a" || ev.Object.GetResourceVersion() != "1003" {
		t.Fatalf("leaving selection: %v %s", ev.Type, ev.Object.GetResourceVersion())
	}
	if ev := evs[1]; ev.Type != watch.Added || ev.Object.GetName() != "b" {
		t.Fatalf("entering selection: %v", ev.Type)
	}
}

// A live watcher pins the events it has not read, beyond the resume window,
// so a burst never outruns it; only beyond maxLag does it get Expired.
func TestStoreLogKeepsWhatWatchersNeed(t *testing.T) {
	s := newTestStore(2, 100)
	_, reader, _ := s.Watch(WatchOptions{Mode: FromNow})
	_, laggard, _ := s.Watch(WatchOptions{Mode: FromNow})
	for i := range 50 {
		s.Set("ns/a", annotated("a", fmt.Sprintf("%03d", i)))
	}
	if got := len(next(t, s, reader)); got != 50 {
		t.Fatalf("reader got %d of 50 burst events", got)
	}
	for i := range 60 {
		s.Set("ns/a", annotated("a", fmt.Sprintf("%03d", 100+i)))
		next(t, s, reader)
	}
	// 110 events: the laggard fell more than maxLag behind.
	var rvErr *VersionError
	if _, _, err := s.Next(laggard, nil, 10); !errors.As(err, &rvErr) || !rvErr.TooOld {
		t.Fatalf("laggard 110 events behind: %v", err)
	}
	s.StopWatch(laggard)
	s.Set("ns/a", annotated("a", "end"))
	if len(s.log) != 2 {
		t.Fatalf("with every watcher caught up the log keeps %d events, want the resume window of 2", len(s.log))
	}
}

func TestStoreBookmarkAndWakeUp(t *testing.T) {
	s := newTestStore(10, 10)
	_, w, _ := s.Watch(WatchOptions{Mode: FromNow, Bookmarks: true})
	_, wait, _ := s.Next(w, nil, 10)
	s.Bookmark()
	<-wait
	evs := next(t, s, w)
	if len(evs) != 1 || evs[0].Type != watch.Bookmark || evs[0].RV != 1000 {
		t.Fatalf("bookmark: %+v", evs)
	}
	_, wait, _ = s.Next(w, nil, 10)
	s.Set("ns/a", svcObj("a", "x"))
	<-wait
	if evs := next(t, s, w); len(evs) != 1 || evs[0].Type != watch.Added {
		t.Fatalf("after wake-up: %+v", evs)
	}
}

func TestStoreIgnoresGenerationOnlyChange(t *testing.T) {
	s := newTestStore(10, 10)
	a := svcObj("a", "x")
	a.Generation = 1
	s.Set("ns/a", a)
	b := svcObj("a", "x")
	b.Generation = 2
	if s.Set("ns/a", b) {
		t.Fatal("a change of generation alone made an event")
	}
	c := svcObj("a", "y")
	c.Generation = 3
	if !s.Set("ns/a", c) {
		t.Fatal("a real change made no event")
	}
	if o, _ := s.Get("ns/a"); o.GetGeneration() != 3 {
		t.Fatalf("served generation %d after a real change, want 3", o.GetGeneration())
	}
}

// The endpointslice and endpoints controllers rewrite the
// last-change-trigger-time annotation with every update, also for endpoints
// the filter takes away: a served form that differs only there (and in
// generation) is unchanged; a real change serves the new annotation, and the
// objects handed in are never modified.
func TestStoreIgnoresTriggerTimeOnlyChange(t *testing.T) {
	const trigger = corev1.EndpointsLastChangeTriggerTime
	withTrigger := func(lbl, at string, gen int64, more ...string) *corev1.Service {
		o := svcObj("a", lbl)
		o.Generation = gen
		o.Annotations = map[string]string{trigger: at}
		for i := 0; i+1 < len(more); i += 2 {
			o.Annotations[more[i]] = more[i+1]
		}
		return o
	}
	s := newTestStore(20, 20)
	s.Set("ns/a", withTrigger("x", "2026-01-01T00:00:00Z", 1, "keep", "1"))
	b := withTrigger("x", "2026-01-01T00:00:05Z", 2, "keep", "1")
	if s.Set("ns/a", b) {
		t.Fatal("a new trigger time (and generation) alone made an event")
	}
	if b.Annotations[trigger] != "2026-01-01T00:00:05Z" || b.Generation != 2 || b.ResourceVersion != "" {
		t.Fatalf("Set modified the object handed in: %+v", b.ObjectMeta)
	}
	if o, _ := s.Get("ns/a"); o.GetAnnotations()[trigger] != "2026-01-01T00:00:00Z" {
		t.Fatalf("served trigger time %q, want the first one kept", o.GetAnnotations()[trigger])
	}
	for _, c := range []struct {
		what string
		obj  *corev1.Service
	}{
		{"another annotation changed with it", withTrigger("x", "2026-01-01T00:00:06Z", 3, "keep", "2")},
		{"an annotation added with it", withTrigger("x", "2026-01-01T00:00:07Z", 4, "keep", "2", "new", "1")},
		{"a label changed with it", withTrigger("y", "2026-01-01T00:00:08Z", 5, "keep", "2", "new", "1")},
	} {
		if !s.Set("ns/a", c.obj) {
			t.Fatalf("%s: no event", c.what)
		}
		if o, _ := s.Get("ns/a"); o.GetAnnotations()[trigger] != c.obj.Annotations[trigger] {
			t.Fatalf("%s: served trigger time %q, want %q", c.what, o.GetAnnotations()[trigger], c.obj.Annotations[trigger])
		}
	}
	dropped := svcObj("a", "y")
	dropped.Generation = 6
	dropped.Annotations = map[string]string{"keep": "2", "new": "1"}
	if s.Set("ns/a", dropped) {
		t.Fatal("the trigger time dropped alone made an event")
	}
	back := withTrigger("y", "2026-01-01T00:00:09Z", 7, "keep", "2", "new", "1")
	if s.Set("ns/a", back) {
		t.Fatal("the trigger time added back alone made an event")
	}
	if !s.Set("ns/a", withTrigger("y", "2026-01-01T00:00:10Z", 8, "keep", "3", "new", "1")) {
		t.Fatal("another annotation changed: no event")
	}
}

// An event keeps the form it replaced only when a selector could see the
// object enter or leave (labels or fields changed); the log is charged the
// encoded size of what it holds.
func TestStoreEventHoldsOneFormUnlessSelectionChanged(t *testing.T) {
	s := newTestStore(100, 100)
	s.Set("ns/a", annotated("a", "001"))
	s.Set("ns/a", annotated("a", "002")) // annotation only: selection unchanged
	relabelled := annotated("a", "002")
	relabelled.Labels = map[string]string{"l": "x"}
	s.Set("ns/a", relabelled)
	s.Delete("ns/a")
	if len(s.log) != 4 {
		t.Fatalf("%d events", len(s.log))
	}
	if s.log[1].Prev != nil || s.log[2].Prev == nil || s.log[3].Prev != nil {
		t.Fatalf("Prev kept: modified %v, relabelled %v, deleted %v", s.log[1].Prev != nil, s.log[2].Prev != nil, s.log[3].Prev != nil)
	}
	var sum int64
	for _, ev := range s.log {
		sum += ev.size
	}
	if s.logBytes != sum || s.log[2].size != objectSize(s.log[2].Object)+objectSize(s.log[2].Prev) {
		t.Fatalf("log charged %d bytes, events %d", s.logBytes, sum)
	}
	// The DELETED holds the last served form itself, at its own version;
	// a watcher gets it stamped with that version on a top-level copy that
	// shares the contents, and the served form is never written to.
	if ev := s.log[3]; ev.RV != 1004 || ev.Object != Object(relabelled) {
		t.Fatalf("deleted event at %d holds %p, want 1004 and the served form %p", ev.RV, ev.Object, relabelled)
	}
	out, _ := translate(s.log[3], nil)
	if d := out.Object.(*corev1.Service); d.ResourceVersion != "1004" || d.Labels["l"] != "x" || d == relabelled ||
		reflect.ValueOf(d.Annotations).UnsafePointer() != reflect.ValueOf(relabelled.Annotations).UnsafePointer() || d.Annotations["a"] != "002" {
		t.Fatalf("deleted form %+v", d.ObjectMeta)
	}
	if relabelled.ResourceVersion != "" {
		t.Fatalf("the served form was stamped: %q", relabelled.ResourceVersion)
	}
}
