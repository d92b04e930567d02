package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// TestRoundTrip: a written snapshot is private (0600), leaves no temporary
// file, and loads back as its sources served it; load removes the
// temporary file a crash left.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p, st := newTestPersister(dir, 1000)
	fill(st)
	st.set("services", "ns/svc2", testService("svc2"))
	p.Write(logr.Discard(), time.Now())

	fi, err := os.Stat(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot mode %v, want 0600", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}

	// A crash between create and rename leaves a temp file; load removes it.
	stale := filepath.Join(dir, "."+fileName+".123.tmp")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lineLogger
	loader, _ := newTestPersister(dir, 5000)
	sn := loader.Load(logs.logger())
	if sn == nil {
		t.Fatalf("snapshot not loaded: %v", logs.all())
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale temp file: %v", err)
	}
	for _, src := range p.Sources {
		want, from, at := src.State()
		got := sn.Objects[src.Kind.Name]
		if len(got) != len(want) {
			t.Fatalf("%s: %d objects, want %d", src.Kind.Name, len(got), len(want))
		}
		for _, o := range want {
			key := o.GetName()
			if src.Kind.Namespaced {
				key = o.GetNamespace() + "/" + key
			}
			if !apiequality.Semantic.DeepEqual(got[key], o) {
				t.Fatalf("%s %s: got %#v, want %#v", src.Kind.Name, key, got[key], o)
			}
		}
		if sec := sn.Section(src.Kind.Name); sec.At != at || sec.From != from {
			t.Fatalf("%s: section %+v, want from %d at %d", src.Kind.Name, sec, from, at)
		}
	}
	if v := sn.MaxVersion(); v != st.Current() {
		t.Fatalf("max version %d, want the clock at the write, %d", v, st.Current())
	}
}

// TestSnapshotTimeIsLastReachable: a snapshot's writtenAt is when upstream
// last answered (gridhosts' rule). With upstream away, an unchanged state
// is not rewritten (not even at shutdown) and a changed one keeps that
// time; reachable again, the time moves on at shutdown; an unchanged state
// is not rewritten before the refresh interval otherwise, and upstream is
// not asked.
func TestSnapshotTimeIsLastReachable(t *testing.T) {
	dir := t.TempDir()
	p, st := newTestPersister(dir, 1000)
	fill(st)
	var away error
	probes := 0
	p.Stamp.Probe = func(context.Context) error { probes++; return away }
	load := func() *Snapshot {
		t.Helper()
		loader, _ := newTestPersister(dir, 5000)
		sn := loader.Load(logr.Discard())
		if sn == nil {
			t.Fatal("no snapshot")
		}
		return sn
	}
	p.MaybeWrite(logr.Discard(), false)
	online := load().Header.WrittenAt

	p.MaybeWrite(logr.Discard(), false)
	if probes != 1 {
		t.Fatalf("unchanged, not due: %d probes, want 1 (the first write's)", probes)
	}
	away = errors.New("connection refused")
	p.MaybeWrite(logr.Discard(), true)
	if got := load().Header.WrittenAt; !got.Equal(online) {
		t.Fatalf("unchanged at shutdown during an outage: written %v, want %v", got, online)
	}
	st.set("services", "ns/other", testService("other"))
	p.MaybeWrite(logr.Discard(), false)
	sn := load()
	if got := sn.Header.WrittenAt; !got.Equal(online) {
		t.Fatalf("changed during an outage: written %v, want the last reachable time %v", got, online)
	}
	if len(sn.Objects["services"]) != 2 {
		t.Fatalf("changed state not written: %d Services", len(sn.Objects["services"]))
	}

	away = nil
	p.MaybeWrite(logr.Discard(), true)
	if got := load().Header.WrittenAt; !got.After(online) {
		t.Fatalf("reachable again: written %v, want after %v", got, online)
	}
}
