package gridhosts

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// heldPods are the pods the current selection holds: the index's, once
// it is live.
func (p *podSelection) heldPods() []string {
	p.mu.Lock()
	cur := p.cur
	p.mu.Unlock()
	if cur == nil {
		return nil
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	keys := slices.Collect(maps.Keys(cur.pods))
	if cur.phase == live {
		keys = cur.idx.podKeys()
	}
	slices.Sort(keys)
	return keys
}

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

	holds := func(what string, want []string, name, ip string) {
		t.Helper()
		poll(t, 2*time.Minute, what, func() error {
			if got := g.watcher.podSelection.heldPods(); !slices.Equal(got, want) {
				return fmt.Errorf("pods held %v, want %v", got, want)
			}
			if got := aRecords(g, "", name); !slices.Equal(got, []string{ip}) {
				return fmt.Errorf("%s: %v, want %s", name, got, ip)
			}
			return nil
		})
	}
	holds("nodeunit1's pods only", demoPods("nodeunit1", 3), demoNames(0), "10.0.1.1")

	// Ask without pause while node-1 moves to nodeunit2.
	var (
		stop    atomic.Bool
		asked   atomic.Int64
		mu      sync.Mutex
		wrong   []string
		sawNew  atomic.Bool
		stopped = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		for !stop.Load() {
			got := aRecords(g, "", demoNames(0))
			asked.Add(1)
			switch {
			case slices.Equal(got, []string{"10.0.1.1"}):
				if sawNew.Load() {
					mu.Lock()
					wrong = append(wrong, "nodeunit1's pod again after nodeunit2's")
					mu.Unlock()
				}
			case slices.Equal(got, []string{"10.0.2.1"}):
				sawNew.Store(true)
			default:
				mu.Lock()
				wrong = append(wrong, fmt.Sprintf("%v", got))
				mu.Unlock()
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	patch := `{"metadata":{"labels":{"zone1":"nodeunit2"}}}`
	must(c.kube.CoreV1().Nodes().Patch(ctx, "node-1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}))(t)
	holds("nodeunit2's pods only after the relabel", demoPods("nodeunit2", 3), demoNames(0), "10.0.2.1")
	stop.Store(true)
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	if len(wrong) > 0 {
		t.Fatalf("%d of %d answers during the relabel were wrong or missing, e.g. %v", len(wrong), asked.Load(), wrong[:min(5, len(wrong))])
	}
	t.Logf("%d answers during the relabel, every one nodeunit1's pod, then nodeunit2's", asked.Load())

	// Scaled up: the new ordinal is selected and answered.
	set := must(c.kube.AppsV1().StatefulSets("default").Get(ctx, "statefulsetgrid-demo-nodeunit2", metav1.GetOptions{}))(t)
	set.Spec.Replicas = ptr.To[int32](4)
	set = must(c.kube.AppsV1().StatefulSets("default").Update(ctx, set, metav1.UpdateOptions{}))(t)
	c.createPod(t, newPod(set, 3, "node-2", "10.0.2.4"))
	holds("the scaled-up pod", demoPods("nodeunit2", 4), demoNames(3), "10.0.2.4")
}

// podKeys are the cache keys of every pod.
func (x *Index) podKeys() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	keys := make([]string, 0, len(x.pods))
	for k := range x.pods {
		keys = append(keys, k)
	}
	return keys
}
