package gridhosts

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// superEdgeStatefulSet builds the child StatefulSet {grid}-{value} the way
// SuperEdge's StatefulSetGrid controller does (its CreateStatefulSet):
// the grid's labels plus the two grid labels on the StatefulSet, a
// controller reference to the grid, spec = the grid's template with only
// the nodeSelector {key}: {value} added. Nothing is added to the pods.
func superEdgeStatefulSet(grid *superedgev1.StatefulSetGrid, value string) *appsv1.StatefulSet {
	labels := map[string]string{}
	for k, v := range grid.Labels {
		labels[k] = v
	}
	labels[superedgev1.LabelGridSelector] = grid.Name
	labels[superedgev1.LabelGridUniqKey] = grid.Spec.GridUniqKey
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: grid.Namespace, Name: grid.Name + "-" + value, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(grid,
				superedgev1.SchemeGroupVersion.WithKind(gridname.KindStatefulSetGrid))},
		},
		Spec: *grid.Spec.Template.DeepCopy(),
	}
	if set.Spec.Template.Spec.NodeSelector == nil {
		set.Spec.Template.Spec.NodeSelector = map[string]string{}
	}
	set.Spec.Template.Spec.NodeSelector[grid.Spec.GridUniqKey] = value
	return set
}

// playNodes binds the pods kube-controller-manager creates to the node their
// nodeSelector picks (as kube-scheduler would) and reports them Running and
// Ready with the address ipFor gives (as a kubelet would), until ctx ends.
func playNodes(ctx context.Context, t testing.TB, kube kubernetes.Interface, nodes map[string]map[string]string, ipFor func(pod *corev1.Pod) string) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if p.DeletionTimestamp != nil {
						// No kubelet stops the containers: finish the delete.
						_ = kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
						continue
					}
					if p.Spec.NodeName == "" {
						if node := nodeFor(p, nodes); node != "" {
							_ = kube.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
								ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
								Target:     corev1.ObjectReference{Kind: "Node", Name: node},
							}, metav1.CreateOptions{})
						}
						continue
					}
					if p.Status.PodIP == "" {
						setPodIPs(p, ipFor(p))
						if _, err := kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
							t.Logf("pod status %s: %v", p.Name, err)
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return &wg
}

// nodeFor is the first node (by name) whose labels satisfy the pod's
// nodeSelector.
func nodeFor(p *corev1.Pod, nodes map[string]map[string]string) string {
	best := ""
	for name, labels := range nodes {
		ok := true
		for k, v := range p.Spec.NodeSelector {
			if labels[k] != v {
				ok = false
			}
		}
		if ok && (best == "" || name < best) {
			best = name
		}
	}
	return best
}

// TestSuperEdgeMadeGrid serves a StatefulSetGrid whose children were made
// the SuperEdge way, with pods created by kube-controller-manager's
// StatefulSet controller from the user's untouched template: no pod carries
// a grid label, yet every unified name answers, over UDP and TCP, in node
// and clients mode, and follows a pod the StatefulSet controller re-creates.
func TestSuperEdgeMadeGrid(t *testing.T) {
	t.Parallel() // its own control plane
	c := startClusterWith(t, controlplane.Options{ControllerManager: true})
	bin := coreDNSBinary(t)
	ctx := t.Context()

	nodes := map[string]map[string]string{
		"node-1": {"zone1": "nodeunit1"},
		"node-2": {"zone1": "nodeunit2"},
	}
	for i, name := range []string{"node-1", "node-2"} {
		must(c.kube.CoreV1().Nodes().Create(ctx, newNode(name, nodes[name], fmt.Sprintf("127.0.0.1%d", i+1)), metav1.CreateOptions{}))(t)
	}
	// Address 10.{generation}.{unit}.{ordinal}: a re-created pod gets a new one.
	var mu sync.Mutex
	generations := map[string]map[types.UID]int{}
	ipFor := func(p *corev1.Pod) string {
		mu.Lock()
		defer mu.Unlock()
		g := generations[p.Name]
		if g == nil {
			g = map[types.UID]int{}
			generations[p.Name] = g
		}
		if _, ok := g[p.UID]; !ok {
			g[p.UID] = len(g) + 1
		}
		unit := strings.TrimPrefix(p.Spec.NodeName, "node-")
		ord := p.Name[strings.LastIndexByte(p.Name, '-')+1:]
		return fmt.Sprintf("10.%d.%s.%s", g[p.UID], unit, ord)
	}
	playCtx, stopPlaying := context.WithCancel(ctx)
	played := playNodes(playCtx, t, c.kube, nodes, ipFor)
	t.Cleanup(func() { stopPlaying(); played.Wait() })

	grid := newGrid("default", "statefulsetgrid-demo", "zone1", "")
	grid.Spec.Template.ServiceName = demoSvc
	grid.Spec.Template.Replicas = ptr.To[int32](2)
	grid = must(c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx, grid, metav1.CreateOptions{}))(t)
	svc := newService("default", demoSvc, "zone1", false)
	svc.Spec.Selector = map[string]string{"app": grid.Name}
	svc.Labels[superedgev1.LabelGridSelector] = grid.Name // as SuperEdge's ServiceGrid labels it
	must(c.kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}))(t)
	for _, unit := range []string{"nodeunit1", "nodeunit2"} {
		must(c.kube.AppsV1().StatefulSets("default").Create(ctx, superEdgeStatefulSet(grid, unit), metav1.CreateOptions{}))(t)
	}

	ports := map[string]int{}
	for _, view := range []string{"node-1", "clients"} {
		ports[view] = freePort(t)
		ready := freePort(t)
		mode := "node " + view
		if view == "clients" {
			mode = "clients"
		}
		startCoreDNS(t, bin, fmt.Sprintf("cluster.local:%d {\n  bind 127.0.0.1\n  ready 127.0.0.1:%d\n  gridhosts {\n    kubeconfig %s\n    %s\n  }\n}\n",
			ports[view], ready, c.cp.Kubeconfig, mode), fmt.Sprintf("http://127.0.0.1:%d/ready", ready))
	}
	server := func(view string) string { return fmt.Sprintf("127.0.0.1:%d", ports[view]) }

	// The first generation of each pod gets 10.1.{unit}.{ordinal}.
	for i := range 2 {
		expect(t, "", server("node-1"), demoNames(i), dns.TypeA, fmt.Sprintf("10.1.1.%d", i))
		expect(t, "127.0.0.12", server("clients"), demoNames(i), dns.TypeA, fmt.Sprintf("10.1.2.%d", i))
	}
	expect(t, "", server("node-1"), demoNames(2), dns.TypeA)

	// The pods are exactly what the StatefulSet controller made from the
	// user's template: no grid label reached them.
	pods := must(c.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}))(t)
	if len(pods.Items) != 4 {
		t.Fatalf("%d pods, want 4", len(pods.Items))
	}
	for _, p := range pods.Items {
		for k := range p.Labels {
			if strings.HasPrefix(k, "superedge.io/") {
				t.Fatalf("pod %s carries %s: not a SuperEdge-shaped child", p.Name, k)
			}
		}
	}

	// The StatefulSet controller re-creates a deleted pod (new UID, new
	// address): the name follows it.
	old := must(c.kube.CoreV1().Pods("default").Get(ctx, "statefulsetgrid-demo-nodeunit1-0", metav1.GetOptions{}))(t)
	if err := c.kube.CoreV1().Pods("default").Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	expect(t, "", server("node-1"), demoNames(0), dns.TypeA, "10.2.1.0")
	if p := must(c.kube.CoreV1().Pods("default").Get(ctx, old.Name, metav1.GetOptions{}))(t); p.UID == old.UID || p.UID == types.UID("") {
		t.Fatalf("pod not re-created: UID %s", p.UID)
	}

	// A StatefulSet released by the grid (no controller reference) is no
	// longer served.
	set := must(c.kube.AppsV1().StatefulSets("default").Get(ctx, grid.Name+"-nodeunit2", metav1.GetOptions{}))(t)
	set.OwnerReferences = nil
	must(c.kube.AppsV1().StatefulSets("default").Update(ctx, set, metav1.UpdateOptions{}))(t)
	expect(t, "127.0.0.12", server("clients"), demoNames(0), dns.TypeA)
	expect(t, "127.0.0.11", server("clients"), demoNames(0), dns.TypeA, "10.2.1.0")
}
