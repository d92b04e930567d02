package snapshottrust

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRewrite(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		last, next time.Time
		final      bool
		want       bool
	}{
		{time.Time{}, t0, false, true},
		{t0, t0, true, false},
		{t0, t0.Add(-time.Second), true, false},
		{t0, t0.Add(time.Second), true, true},
		{t0, t0.Add(time.Second), false, false},
		{t0, t0.Add(RefreshInterval), false, true},
	} {
		if got := rewrite(tc.last, tc.next, tc.final); got != tc.want {
			t.Errorf("rewrite(%v, +%v, final %v) = %v", tc.last, tc.next.Sub(tc.last), tc.final, got)
		}
	}
	if refreshDue(t0, t0.Add(time.Minute), false) || !refreshDue(t0, t0.Add(time.Minute), true) || !refreshDue(t0, t0.Add(RefreshInterval), false) {
		t.Error("refreshDue")
	}
}

func TestStampKeepsLastReachable(t *testing.T) {
	var away error
	s := Stamp{Probe: func(context.Context) error { return away }}
	t0 := time.Now()
	if got := s.Next(t0); !got.Equal(t0) {
		t.Fatalf("reachable: %v, want %v", got, t0)
	}
	away = errors.New("refused")
	if got := s.Next(t0.Add(time.Hour)); !got.Equal(t0) {
		t.Fatalf("away: %v, want the last reachable %v", got, t0)
	}
	fresh := Stamp{Probe: func(context.Context) error { return away }}
	if got := fresh.Next(t0); !got.Equal(t0) {
		t.Fatalf("never reachable: %v, want now", got)
	}
}

// TestForWrite: changed content is written with the probe's time; unchanged
// content is not written, and the apiserver not probed, until the refresh
// is due or at shutdown, and then only when the time moves on.
func TestForWrite(t *testing.T) {
	probes := 0
	var away error
	s := Stamp{Probe: func(context.Context) error { probes++; return away }}
	t0 := time.Now()
	if at, ok := s.ForWrite(false, time.Time{}, t0, false); !ok || !at.Equal(t0) || probes != 1 {
		t.Fatalf("first write: %v %v, %d probes; want %v, true, 1", at, ok, probes, t0)
	}
	if _, ok := s.ForWrite(true, t0, t0.Add(time.Minute), false); ok || probes != 1 {
		t.Fatalf("unchanged a minute later: written %v, %d probes; want neither", ok, probes)
	}
	if at, ok := s.ForWrite(true, t0, t0.Add(time.Minute), true); !ok || !at.Equal(t0.Add(time.Minute)) || probes != 2 {
		t.Fatalf("unchanged at shutdown: %v %v, %d probes; want the probe's time, true, 2", at, ok, probes)
	}
	away = errors.New("refused")
	if _, ok := s.ForWrite(true, t0.Add(time.Minute), t0.Add(2*RefreshInterval), false); ok || probes != 3 {
		t.Fatalf("unchanged, apiserver away: written %v, %d probes; want not written (its time would not move), 3", ok, probes)
	}
	if at, ok := s.ForWrite(false, t0.Add(time.Minute), t0.Add(2*RefreshInterval), false); !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("changed, apiserver away: %v %v; want the last reachable time, true", at, ok)
	}
}
