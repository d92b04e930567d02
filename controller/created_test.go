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
// grid's, as the informer would cache it, until the cache shows it (then
// the cache's copy, if it came after the sync read the grid's children) or
// the informer notifies it; only for its own grid, not past createdKeep.
func TestCreatedChildrenStandInUntilCached(t *testing.T) {
	var s createdChildren[*appsv1.Deployment]
	g1, g2 := cache.ObjectName{Namespace: "ns", Name: "g1"}, cache.ObjectName{Namespace: "ns", Name: "g2"}
	dep := func(name, uid string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	}
	t0 := time.Unix(1000, 0)
	inCache := map[string]*appsv1.Deployment{}
	standIns := func(grid cache.ObjectName, at time.Duration, controlled map[string]*appsv1.Deployment) []string {
		t.Helper()
		if controlled == nil {
			controlled = map[string]*appsv1.Deployment{}
		}
		s.addUncached(grid, controlled, func(name string) (*appsv1.Deployment, bool) {
			d, ok := inCache[name]
			return d, ok
		}, t0.Add(at))
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
	created := dep("g1-a", "ua")
	created.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate}}
	s.remember(g1, created, t0)
	if mf := s.byUID["ua"].obj.ManagedFields; len(mf) != 2 || mf[1].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("remembered as created, not as the informer caches it (Transform): managedFields %+v", mf)
	}
	s.remember(g1, dep("g1-b", "ub"), t0)
	s.remember(g2, dep("g2-a", "uc"), t0)
	check("before the cache shows them", standIns(g1, time.Second, nil), "g1-a/ua", "g1-b/ub")
	check("another grid's", standIns(g2, time.Second, nil), "g2-a/uc")
	check("what the sync read wins", standIns(g1, time.Second, map[string]*appsv1.Deployment{"g1-a": dep("g1-a", "read")}), "g1-a/read", "g1-b/ub")

	cachedA := dep("g1-a", "ua")
	cachedA.ResourceVersion = "7"
	inCache["g1-a"] = cachedA
	inCache["g1-b"] = dep("g1-b", "someone-else")
	got := map[string]*appsv1.Deployment{}
	check("cached after the sync read its children: the cache's copy, only of the same UID", standIns(g1, time.Second, got), "g1-a/ua")
	if got["g1-a"].ResourceVersion != "7" {
		t.Errorf("stand-in %+v, want the cached copy", got["g1-a"])
	}
	delete(inCache, "g1-a")
	delete(inCache, "g1-b")
	check("once cached, forgotten", standIns(g1, time.Second, nil))

	s.remember(g1, dep("g1-c", "ud"), t0)
	s.seen("ud")
	check("notified (created, then deleted): forgotten", standIns(g1, time.Second, nil))
	s.remember(g1, dep("g1-d", "ue"), t0)
	check("within createdKeep", standIns(g1, createdKeep, nil), "g1-d/ue")
	check("past createdKeep", standIns(g1, createdKeep+time.Second, nil))
	s.forgetGrid(g2)
	check("deleted grid forgotten", standIns(g2, time.Second, nil))
}
