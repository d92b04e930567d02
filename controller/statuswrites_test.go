package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// TestStatusWritesStartSyncsFromTheLastWrite: while the cache holds a
// version the controller's own status writes replaced (one or several in a
// row), a sync starts from the last write; once the cache shows that write,
// anything newer, or a grid of the same name recreated, the cache is read.
func TestStatusWritesStartSyncsFromTheLastWrite(t *testing.T) {
	grid := func(uid, rv string) *superedgev1.DeploymentGrid {
		return &superedgev1.DeploymentGrid{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: types.UID(uid), ResourceVersion: rv}}
	}
	var s statusWrites[*superedgev1.DeploymentGrid]
	rv := func(g *superedgev1.DeploymentGrid) string { return string(g.UID) + "@" + g.ResourceVersion }
	check := func(what string, cached *superedgev1.DeploymentGrid, want string) {
		t.Helper()
		if got := rv(s.latest(cached)); got != want {
			t.Errorf("%s: sync starts from %s, want %s", what, got, want)
		}
	}
	check("nothing written", grid("u1", "1"), "u1@1")
	s.remember(grid("u1", "1"), grid("u1", "2"))
	check("cache behind one write", grid("u1", "1"), "u1@2")
	s.remember(grid("u1", "2"), grid("u1", "3"))
	check("cache behind two writes", grid("u1", "1"), "u1@3")
	check("cache shows the first of two", grid("u1", "2"), "u1@3")
	check("recreated grid of the same name", grid("u2", "1"), "u2@1")
	check("entry dropped with the recreation", grid("u1", "1"), "u1@1")

	s.remember(grid("u1", "5"), grid("u1", "6"))
	check("cache caught up", grid("u1", "6"), "u1@6")
	check("entry dropped once caught up", grid("u1", "5"), "u1@5")

	s.remember(grid("u1", "6"), grid("u1", "7"))
	check("someone else wrote after us", grid("u1", "8"), "u1@8")

	s.remember(grid("u1", "8"), grid("u1", "9"))
	s.remember(grid("u1", "4"), grid("u1", "10")) // not a successor of 9: a fresh chain
	check("a chain not continued keeps none of the old versions", grid("u1", "8"), "u1@8")

	s.remember(grid("u1", "10"), grid("u1", "11"))
	s.forget(cache.ObjectName{Namespace: "ns", Name: "g"})
	check("forgotten after a conflict", grid("u1", "10"), "u1@10")
}
