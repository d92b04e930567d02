package index

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/internal/fixtures"
)

// TestResolvedGridsFollowChanges: node mode answers a unified name from the
// grids resolved for its node, clients mode from the units resolved by
// nodeunit (resolved.go); after every kind of change (pods, StatefulSets,
// Services, the grid, the node's labels) each name gets the answer the
// whole rule (memberByRule) gives on the same index.
func TestResolvedGridsFollowChanges(t *testing.T) {
	for _, nodeMode := range []bool{true, false} {
		t.Run(fmt.Sprintf("nodeMode=%v", nodeMode), func(t *testing.T) { resolvedFollowChanges(t, nodeMode) })
	}
}

func resolvedFollowChanges(t *testing.T, nodeMode bool) {
	x := New(Options{NodeMode: nodeMode})
	grid := fixtures.Grid("default", "db", "zone1", "uid-db")
	a := fixtures.Set(grid, "a", "svc", "uid-db-a", 3)
	b := fixtures.Set(grid, "b", "svc", "uid-db-b", 3)
	x.Upsert(grid)
	x.Upsert(fixtures.Service("default", "svc", "zone1", false))
	x.Upsert(fixtures.Service("default", "other", "zone1", false))
	x.Upsert(fixtures.Node("asking", map[string]string{"zone1": "a"}, ""))
	for _, s := range []any{a, b} {
		x.Upsert(s)
	}
	for i := range 3 {
		x.Upsert(fixtures.Pod(a, i, "node-1", fmt.Sprintf("10.0.1.%d", i+1)))
		x.Upsert(fixtures.Pod(b, i, "node-2", fmt.Sprintf("10.0.2.%d", i+1)))
	}
	var queries []MemberQuery
	for _, svc := range []string{"svc", "other"} {
		for _, g := range []string{"db", "nogrid"} {
			for _, ord := range []string{"0", "1", "2", "3"} {
				queries = append(queries, MemberQuery{Namespace: "default", Grid: g, Ordinal: ord, Service: svc})
			}
		}
	}
	answered := 0
	agree := func(step string) {
		t.Helper()
		for _, q := range queries {
			v := &Viewer{Node: "asking"}
			got, want := x.Member(v, &q), x.memberByRule(v, &q)
			if got.Placed != want.Placed || got.HasGrid != want.HasGrid || got.GridKey != want.GridKey || got.Pod != want.Pod {
				t.Fatalf("%s: %+v: from the resolved grids %+v, by the rule %+v", step, q, got, want)
			}
			if got.Pod != nil {
				answered++
			}
		}
		if nodeMode && x.resolved == nil || !nodeMode && x.units == nil {
			t.Fatalf("%s: nothing resolved after the queries", step)
		}
	}
	agree("start")
	x.Delete(fixtures.Pod(a, 1, "node-1", "10.0.1.2"))
	agree("pod 1 deleted")
	dying := fixtures.Pod(a, 2, "node-1", "10.0.1.3")
	dying.DeletionTimestamp = &metav1.Time{}
	x.Upsert(dying)
	agree("pod 2 terminating")
	x.Upsert(fixtures.Pod(a, 1, "node-1", "10.0.1.9"))
	agree("pod 1 back with another address")
	toOther := a.DeepCopy()
	toOther.Spec.ServiceName = "other"
	x.Upsert(toOther)
	agree("StatefulSet a serves through Service other")
	x.Upsert(a)
	x.Upsert(fixtures.Grid("default", "db", "zone2", "uid-db"))
	agree("the grid's key changed")
	x.Upsert(grid)
	x.Upsert(fixtures.Service("default", "svc", "zone2", false))
	agree("Service svc of another key")
	x.Upsert(fixtures.Service("default", "svc", "zone1", false))
	x.Upsert(fixtures.Node("asking", map[string]string{"zone1": "b"}, ""))
	agree("node relabelled to nodeunit b")
	x.Delete(b)
	agree("StatefulSet b deleted")
	x.Upsert(fixtures.Node("asking", map[string]string{"zone1": "a"}, ""))
	agree("node back in nodeunit a")
	x.Delete(fixtures.Node("asking", nil, ""))
	agree("node deleted")
	if answered == 0 {
		t.Fatal("no name was answered: the test compares nothing but refusals")
	}
}
