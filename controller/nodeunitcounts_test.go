package controller

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// TestNodeHandlersEnqueueOnlyWhenANodeunitAppearsOrGoes drives the node
// handler of a DeploymentGrid controller through a relabel and checks which
// events enqueue the grid of the key: every one that adds or removes a
// nodeunit (a dropped one leaves a child missing or a vanished nodeunit's
// child in place until the next resync), none that only moves Nodes between
// existing nodeunits.
func TestNodeHandlersEnqueueOnlyWhenANodeunitAppearsOrGoes(t *testing.T) {
	grids := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{gridUniqKeyIndex: func(obj any) ([]string, error) {
		return []string{obj.(*superedgev1.DeploymentGrid).Spec.GridUniqKey}, nil
	}})
	for name, key := range map[string]string{"by-zone": "zone", "by-site": "site"} {
		if err := grids.Add(&superedgev1.DeploymentGrid{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: superedgev1.DeploymentGridSpec{GridUniqKey: key}}); err != nil {
			t.Fatal(err)
		}
	}
	c := &gridController[*superedgev1.DeploymentGrid, *appsv1.Deployment, *appsv1apply.DeploymentApplyConfiguration]{
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]()),
	}
	defer c.queue.ShutDown()
	h := c.nodeHandlers(grids)
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	// queued empties the queue and returns the grids that were in it.
	queued := func() []string {
		var names []string
		for c.queue.Len() > 0 {
			k, _ := c.queue.Get()
			names = append(names, k.Name)
			c.queue.Done(k)
			c.queue.Forget(k)
		}
		slices.Sort(names)
		return names
	}
	a1 := node("a1", map[string]string{"zone": "a", "site": "s1"})
	a2 := node("a2", map[string]string{"zone": "a", "site": "s1"})
	b1 := node("b1", map[string]string{"zone": "b", "site": "s1"})
	steps := []struct {
		what string
		do   func()
		want []string
	}{
		{"first Node of zone a and site s1", func() { h.OnAdd(a1, false) }, []string{"by-site", "by-zone"}},
		{"second Node of zone a", func() { h.OnAdd(a2, false) }, nil},
		{"first Node of zone b", func() { h.OnAdd(b1, false) }, []string{"by-zone"}},
		{"a2 moves to zone b (a keeps a1)", func() { h.OnUpdate(a2, node("a2", map[string]string{"zone": "b", "site": "s1"})) }, nil},
		{"a1 moves to zone b: zone a goes", func() { h.OnUpdate(a1, node("a1", map[string]string{"zone": "b", "site": "s1"})) }, []string{"by-zone"}},
		{"a1 moves to new zone c", func() {
			h.OnUpdate(node("a1", map[string]string{"zone": "b", "site": "s1"}), node("a1", map[string]string{"zone": "c", "site": "s1"}))
		}, []string{"by-zone"}},
		{"heartbeat: same labels", func() {
			h.OnUpdate(node("a1", map[string]string{"zone": "c", "site": "s1"}), node("a1", map[string]string{"zone": "c", "site": "s1"}))
		}, nil},
		{"a1 loses its zone label: zone c goes", func() {
			h.OnUpdate(node("a1", map[string]string{"zone": "c", "site": "s1"}), node("a1", map[string]string{"site": "s1"}))
		}, []string{"by-zone"}},
		{"an empty value is no nodeunit", func() {
			h.OnUpdate(node("a1", map[string]string{"site": "s1"}), node("a1", map[string]string{"zone": "", "site": "s1"}))
		}, nil},
		{"b1 deleted (zone b keeps a2)", func() { h.OnDelete(b1) }, nil},
		{"a2 deleted through a tombstone: zone b goes", func() {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "a2", Obj: node("a2", map[string]string{"zone": "b", "site": "s1"})})
		}, []string{"by-zone"}},
		{"last Node of site s1 deleted", func() { h.OnDelete(node("a1", map[string]string{"zone": "", "site": "s1"})) }, []string{"by-site"}},
		{"zone b comes back", func() { h.OnAdd(node("b2", map[string]string{"zone": "b"}), false) }, []string{"by-zone"}},
	}
	for _, s := range steps {
		s.do()
		if got := queued(); !slices.Equal(got, s.want) {
			t.Errorf("%s: enqueued %v, want %v", s.what, got, s.want)
		}
	}
}
