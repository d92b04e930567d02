package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/statefile"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/internal/fixtures"
)

var demoOwner = Owner{Node: "node-1", Zones: []string{"cluster.local."}}

// demoIndex is an index of SuperEdge's example.
func demoIndex() *index.Index {
	x := index.New(index.Options{})
	for _, o := range fixtures.Demo() {
		x.Upsert(o)
	}
	return x
}

// writeDemoSnapshot writes the demo objects' snapshot to a new file and
// returns its path.
func writeDemoSnapshot(t testing.TB, owner Owner) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gridhosts.snapshot")
	if err := NewWriter(path, time.Minute, owner).Write(demoIndex(), false); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSnapshotAgeDuringOutage: a snapshot's time is when the apiserver
// was last known reachable. With the apiserver away, an unchanged index is
// not rewritten (not even at shutdown) and a changed one keeps that time;
// reachable again, the time moves on.
func TestSnapshotAgeDuringOutage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gridhosts.snapshot")
	x := demoIndex()
	var away error
	s := NewWriter(path, time.Minute, demoOwner)
	s.Stamp.Probe = func(context.Context) error { return away }
	written := func() time.Time {
		t.Helper()
		h, _, err := Read(path, demoOwner)
		if err != nil {
			t.Fatal(err)
		}
		return h.Written
	}
	if err := s.Write(x, false); err != nil {
		t.Fatal(err)
	}
	online := written()

	away = errors.New("connection refused")
	if err := s.Write(x, true); err != nil {
		t.Fatal(err)
	}
	if got := written(); !got.Equal(online) {
		t.Fatalf("unchanged index at shutdown during an outage: written %v, want %v", got, online)
	}
	x.Upsert(fixtures.Node("node-9", nil, "10.0.0.9"))
	if err := s.Write(x, false); err != nil {
		t.Fatal(err)
	}
	if got := written(); !got.Equal(online) {
		t.Fatalf("changed index during an outage: written %v, want the last reachable time %v", got, online)
	}
	if _, b, _ := Read(path, demoOwner); len(b.Nodes) != 5 {
		t.Fatalf("changed index not written: %d nodes", len(b.Nodes))
	}

	away = nil
	if err := s.Write(x, true); err != nil {
		t.Fatal(err)
	}
	if got := written(); !got.After(online) {
		t.Fatalf("reachable again: written %v, want after %v", got, online)
	}
}

// TestSnapshotCreatesDirectory: a missing directory is created 0700.
func TestSnapshotCreatesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "gridhosts")
	s := NewWriter(filepath.Join(dir, "gridhosts.snapshot"), time.Minute, demoOwner)
	s.Prepare()
	if err := s.Write(demoIndex(), false); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory %v, %v; want 0700", st, err)
	}
}

// FuzzDecodeSnapshot: no input makes decoding panic, and whatever decodes
// builds an index without panicking.
func FuzzDecodeSnapshot(f *testing.F) {
	good, err := os.ReadFile(writeDemoSnapshot(f, demoOwner))
	if err != nil {
		f.Fatal(err)
	}
	payload, err := statefile.Unframe(good, Format)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(payload)
	f.Add([]byte{0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, b, err := decodePayload(data); err == nil {
			b.Index(false)
		}
	})
}
