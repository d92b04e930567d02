package gridhosts

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func demoPods(unit string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("default/statefulsetgrid-demo-%s-%d", unit, i))
	}
	return out
}

// TestNodeModeSelectsOwnNodeunitPods: in node mode the pod informer holds
// exactly the pods of this node's nodeunit (selected by name on the
// apiserver); a relabel of the node moves the selection and the answers
// with no query answered wrong or not at all on the way (every answer is
// the old nodeunit's pod until the new one's has synced, then the new
// one's); a StatefulSet scaled up gets its new pod selected and answered.
func TestNodeModeSelectsOwnNodeunitPods(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedDemo(t)
	ctx := t.Context()
	g := c.startNodeMode(t, "node-1")

	// holding: the selection holds exactly want, and name is answered ip.
	holding := func(want []string, name, ip string) func() error {
		return func() error {
			if got := g.watcher.SelectedPods(); !slices.Equal(got, want) {
				return fmt.Errorf("pods held %v, want %v", got, want)
			}
			if got := aRecords(g, "", name); !slices.Equal(got, []string{ip}) {
				return fmt.Errorf("%s: %v, want %s", name, got, ip)
			}
			return nil
		}
	}
	poll(t, 2*time.Minute, "nodeunit1's pods only", holding(demoPods("nodeunit1", 3), demoNames(0), "10.0.1.1"))

	// Asked without pause while node-1 moves to nodeunit2.
	askWhile(t, g, "10.0.1.1", "10.0.2.1", "nodeunit2's pods only after the relabel", func() {
		patch := `{"metadata":{"labels":{"zone1":"nodeunit2"}}}`
		must(c.kube.CoreV1().Nodes().Patch(ctx, "node-1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}))(t)
	}, holding(demoPods("nodeunit2", 3), demoNames(0), "10.0.2.1"))

	// Scaled up: the new ordinal is selected and answered.
	set := must(c.kube.AppsV1().StatefulSets("default").Get(ctx, "statefulsetgrid-demo-nodeunit2", metav1.GetOptions{}))(t)
	set.Spec.Replicas = ptr.To[int32](4)
	set = must(c.kube.AppsV1().StatefulSets("default").Update(ctx, set, metav1.UpdateOptions{}))(t)
	c.createPod(t, newPod(set, 3, "node-2", "10.0.2.4"))
	poll(t, 2*time.Minute, "the scaled-up pod", holding(demoPods("nodeunit2", 4), demoNames(3), "10.0.2.4"))
}
