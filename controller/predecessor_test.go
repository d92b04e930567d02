package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func TestPredecessorAlive(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	held := resourcelock.LeaderElectionRecord{HolderIdentity: "master-0_x", LeaseDurationSeconds: 15}
	for _, c := range []struct {
		name       string
		rec        resourcelock.LeaderElectionRecord
		lastChange time.Time
		want       bool
	}{
		{"renewed just now", held, now, true},
		{"renewed within the lease", held, now.Add(-14 * time.Second), true},
		{"lease ran out", held, now.Add(-15 * time.Second), false},
		{"released (no holder)", resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 15}, now, false},
		{"no duration: SuperEdge's 15s default", resourcelock.LeaderElectionRecord{HolderIdentity: "h"}, now.Add(-10 * time.Second), true},
		{"no duration, stale", resourcelock.LeaderElectionRecord{HolderIdentity: "h"}, now.Add(-16 * time.Second), false},
	} {
		if got := predecessorAlive(c.rec, c.lastChange, now); got != c.want {
			t.Errorf("%s: alive=%v, want %v", c.name, got, c.want)
		}
	}
}
