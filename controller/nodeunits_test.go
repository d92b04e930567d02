package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// TestNodeEventsEnqueueOnlyAffectedGrids: a node update enqueues exactly the
// grids whose gridUniqKey changed on it; a heartbeat (status only) enqueues nothing.
func TestNodeEventsEnqueueOnlyAffectedGrids(t *testing.T) {
	grids := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{gridUniqKeyIndex: func(obj any) ([]string, error) {
		return []string{obj.(*superedgev1.DeploymentGrid).Spec.GridUniqKey}, nil
	}})
	for name, key := range map[string]string{"a": "zone1", "b": "zone2", "c": "zone1"} {
		if err := grids.Add(&superedgev1.DeploymentGrid{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: superedgev1.DeploymentGridSpec{GridUniqKey: key}}); err != nil {
			t.Fatal(err)
		}
	}
	c := &gridController[*superedgev1.DeploymentGrid, *appsv1.Deployment, *appsv1apply.DeploymentApplyConfiguration]{
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]()),
	}
	defer c.queue.ShutDown()
	h := c.nodeHandlers(grids)

	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1", Labels: map[string]string{"zone1": "u1", "zone2": "v1"}}}
	beat := old.DeepCopy()
	beat.ResourceVersion = "2"
	beat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	h.OnUpdate(old, beat)
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("heartbeat enqueued %d grids", n)
	}
	relabel := beat.DeepCopy()
	relabel.Labels["zone1"] = "u2"
	relabel.Labels["unrelated"] = "x"
	h.OnUpdate(beat, relabel)
	got := map[string]bool{}
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		got[k.Name] = true
		c.queue.Done(k)
	}
	if len(got) != 2 || !got["a"] || !got["c"] {
		t.Errorf("enqueued %v, want a and c", got)
	}
}

func TestNodeUnitValues(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{nodeLabelKeyIndex: indexNodeLabelKeys})
	for name, labels := range map[string]map[string]string{
		"node0": {"zone1": "nodeunit1"}, "node1": {"zone1": "nodeunit2"}, "node2": {"zone1": "nodeunit2"},
		"node3": {"zone1": ""}, "node4": {"other": "x"},
	} {
		if err := idx.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	got := nodeUnits{indexer: idx}.values("zone1")
	if len(got) != 2 || got[0] != "nodeunit1" || got[1] != "nodeunit2" {
		t.Errorf("nodeunits %v", got)
	}
	if got := (nodeUnits{indexer: idx}).values("missing"); len(got) != 0 {
		t.Errorf("nodeunits of a missing key: %v", got)
	}
}
