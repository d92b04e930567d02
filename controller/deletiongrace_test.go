package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestDeletionGrace(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := newDeletionGrace(5*time.Minute, clk)
	grid := cache.ObjectName{Namespace: "ns", Name: "web"}
	start := clk.Now()

	deadline, first := g.mark(grid, "u1")
	if !first || !deadline.Equal(start.Add(5*time.Minute)) {
		t.Fatalf("first mark: %v %v", deadline, first)
	}
	clk.Step(time.Minute)
	if again, first := g.mark(grid, "u1"); first || !again.Equal(deadline) {
		t.Errorf("a later mark must keep the first deadline: %v %v", again, first)
	}
	if !g.clear("u1") {
		t.Error("clear of a pending child must report it")
	}
	if g.clear("u1") {
		t.Error("clear of nothing must not report")
	}
	// Nodes gone again: a new full grace period.
	if d, first := g.mark(grid, "u1"); !first || !d.Equal(clk.Now().Add(5*time.Minute)) {
		t.Errorf("re-mark: %v %v", d, first)
	}
	g.mark(cache.ObjectName{Namespace: "ns", Name: "other"}, "u2")
	g.forgetGrid(grid)
	if g.clear("u1") || !g.clear("u2") {
		t.Error("forgetGrid must drop only that grid's records")
	}
}
