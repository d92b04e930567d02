package wrapper

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func svcObj(name string, lbl string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"l": lbl}}}
}

func newTestStore(ring, buf int) *Store {
	return NewStore("services", NewClock(1000), func() Object { return &corev1.Service{} }, ring, buf)
}

func TestStoreEventsOnlyOnChange(t *testing.T) {
	s := newTestStore(10, 10)
	_, w, _ := s.Watch(WatchOptions{Mode: FromNow})
	if !s.Set("ns/a", svcObj("a", "x")) || s.Set("ns/a", svcObj("a", "x")) || !s.Set("ns/a", svcObj("a", "y")) || !s.Delete("ns/a") || s.Delete("ns/a") {
		t.Fatal("Set/Delete reported wrong changes")
	}
	var got []watch.EventType
	var rvs []string
	for range 3 {
		ev := <-w.Events()
		got = append(got, ev.Type)
		rvs = append(rvs, ev.Object.GetResourceVersion())
	}
	if got[0] != watch.Added || got[1] != watch.Modified || got[2] != watch.Deleted || rvs[0] != "1001" || rvs[2] != "1003" {
		t.Fatalf("events %v at %v", got, rvs)
	}
	if len(w.Events()) != 0 {
		t.Fatal("unchanged Set emitted an event")
	}
}

func TestStoreResumeAndTooOld(t *testing.T) {
	s := newTestStore(3, 10)
	for _, l := range []string{"1", "2", "3", "4", "5"} {
		s.Set("ns/a", svcObj("a", l))
	} // RVs 1001..1005, ring keeps 1003..1005
	initial, w, err := s.Watch(WatchOptions{Mode: FromVersion, RV: 1003})
	if err != nil || len(initial) != 2 || initial[0].RV != 1004 {
		t.Fatalf("resume from 1003: %v %v", initial, err)
	}
	s.StopWatch(w)
	s.StopWatch(w)
	var rvErr *rvError
	if _, _, err := s.Watch(WatchOptions{Mode: FromVersion, RV: 1001}); !errors.As(err, &rvErr) || !rvErr.tooOld {
		t.Fatalf("resume from evicted version: %v", err)
	}
	if _, _, err := s.Watch(WatchOptions{Mode: FromVersion, RV: 999}); err == nil {
		t.Fatal("resume from a previous process's version succeeded")
	}
	if _, _, err := s.Watch(WatchOptions{Mode: FromVersion, RV: 2000}); !errors.As(err, &rvErr) || rvErr.tooOld {
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
	if ev := <-w.Events(); ev.Type != watch.Deleted || ev.Object.GetName() != "a" || ev.Object.GetResourceVersion() != "1003" {
		t.Fatalf("leaving selection: %v %s", ev.Type, ev.Object.GetResourceVersion())
	}
	if ev := <-w.Events(); ev.Type != watch.Added || ev.Object.GetName() != "b" {
		t.Fatalf("entering selection: %v", ev.Type)
	}
}

func TestStoreCutsOffSlowWatcher(t *testing.T) {
	s := newTestStore(100, 2)
	cut := make(chan struct{})
	_, slow, _ := s.Watch(WatchOptions{Mode: FromNow, OnCutoff: func() { close(cut) }})
	_, fast, _ := s.Watch(WatchOptions{Mode: FromNow})
	for i := range 5 {
		s.Set("ns/a", svcObj("a", string(rune('a'+i))))
		<-fast.Events()
	}
	<-cut
	n := 0
	for range slow.Events() {
		n++
	}
	if n != 2 || s.Watchers() != 1 {
		t.Fatalf("slow watcher got %d buffered events; %d watchers left", n, s.Watchers())
	}
	s.StopWatch(slow) // after cutoff: no double close
}
