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
		if got := Rewrite(tc.last, tc.next, tc.final); got != tc.want {
			t.Errorf("Rewrite(%v, +%v, final %v) = %v", tc.last, tc.next.Sub(tc.last), tc.final, got)
		}
	}
	if RefreshDue(t0, t0.Add(time.Minute), false) || !RefreshDue(t0, t0.Add(time.Minute), true) || !RefreshDue(t0, t0.Add(RefreshInterval), false) {
		t.Error("RefreshDue")
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
