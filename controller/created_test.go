package controller

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// TestCreatedChildrenStandInUntilCached: a created child counts as the
// grid's until the cache shows it or the informer notifies it (then the
// cache is read), only for its own grid, and not past createdKeep.
func TestCreatedChildrenStandInUntilCached(t *testing.T) {
	var s createdChildren[*appsv1.Deployment]
	g1, g2 := cache.ObjectName{Namespace: "ns", Name: "g1"}, cache.ObjectName{Namespace: "ns", Name: "g2"}
	dep := func(name, uid string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	}
	t0 := time.Unix(1000, 0)
	inCache := map[string]bool{}
	standIns := func(grid cache.ObjectName, at time.Duration, controlled map[string]*appsv1.Deployment) []string {
		t.Helper()
		if controlled == nil {
			controlled = map[string]*appsv1.Deployment{}
		}
		s.addUncached(grid, controlled, func(name string) bool { return inCache[name] }, t0.Add(at))
		var names []string
		for n, d := range controlled {
			names = append(names, n+"/"+string(d.UID))
		}
		slices.Sort(names)
		return names
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	s.remember(g1, dep("g1-a", "ua"), t0)
	s.remember(g1, dep("g1-b", "ub"), t0)
	s.remember(g2, dep("g2-a", "uc"), t0)
	check("before the cache shows them", standIns(g1, time.Second, nil), "g1-a/ua", "g1-b/ub")
	check("another grid's", standIns(g2, time.Second, nil), "g2-a/uc")
	check("the cache's own copy wins", standIns(g1, time.Second, map[string]*appsv1.Deployment{"g1-a": dep("g1-a", "cached")}), "g1-a/cached", "g1-b/ub")

	inCache["g1-a"] = true
	check("shown by the cache: forgotten", standIns(g1, time.Second, nil), "g1-b/ub")
	inCache["g1-a"] = false
	check("gone again: not brought back", standIns(g1, time.Second, nil), "g1-b/ub")
	s.seen("ub")
	check("notified (created, then deleted): forgotten", standIns(g1, time.Second, nil))

	s.remember(g1, dep("g1-c", "ud"), t0)
	check("within createdKeep", standIns(g1, createdKeep, nil), "g1-c/ud")
	check("past createdKeep", standIns(g1, createdKeep+time.Second, nil))
	s.forgetGrid(g2)
	check("deleted grid forgotten", standIns(g2, time.Second, nil))
}
