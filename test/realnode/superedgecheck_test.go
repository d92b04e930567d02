package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// superEdgeManager is the field manager of SuperEdge's controller's
// Create/Update calls (its client-go user agent's first part), and the one
// name our controller applies under too.
const superEdgeManager = "application-grid-controller"

// appliedHash is what our controller writes on each child it manages.
const appliedHash = "superedge.io/applied-hash"

// gridWorkloads are the demo grids' workloads that a takeover must leave
// alone: each pod (UID and container restarts), ReplicaSet and
// ControllerRevision (UID) in default, by name.
type gridWorkloads struct {
	pods, replicaSets, revisions map[string]string
}

func (w gridWorkloads) String() string {
	return fmt.Sprintf("%d pods, %d ReplicaSets, %d ControllerRevisions", len(w.pods), len(w.replicaSets), len(w.revisions))
}

// madeBySuperEdge reads the grids' workloads (readGridWorkloads) and checks
// that SuperEdge's controller made their Deployments and StatefulSets.
func madeBySuperEdge(ctx context.Context, client kubernetes.Interface) (gridWorkloads, error) {
	return readGridWorkloads(ctx, client, true)
}

// readGridWorkloads reads the demo grids' workloads; with bySuperEdge it
// also checks that SuperEdge's controller wrote their Deployments and
// StatefulSets (writtenBySuperEdge).
func readGridWorkloads(ctx context.Context, client kubernetes.Interface, bySuperEdge bool) (gridWorkloads, error) {
	w := gridWorkloads{pods: map[string]string{}, replicaSets: map[string]string{}, revisions: map[string]string{}}
	sel := metav1.ListOptions{LabelSelector: "superedge.io/grid-selector"}
	deps, err := client.AppsV1().Deployments("default").List(ctx, sel)
	if err != nil {
		return w, err
	}
	stss, err := client.AppsV1().StatefulSets("default").List(ctx, sel)
	if err != nil {
		return w, err
	}
	var children []metav1.Object
	for i := range deps.Items {
		children = append(children, &deps.Items[i])
	}
	for i := range stss.Items {
		children = append(children, &stss.Items[i])
	}
	if len(children) != 4 {
		return w, fmt.Errorf("%d grid Deployments and StatefulSets, want 4", len(children))
	}
	owners := map[types.UID]bool{}
	for _, c := range children {
		owners[c.GetUID()] = true
		if bySuperEdge && !writtenBySuperEdge(c) {
			return w, fmt.Errorf("%s: not made by SuperEdge's controller (annotations %v, managed fields %v)", c.GetName(), c.GetAnnotations(), c.GetManagedFields())
		}
	}
	rss, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return w, err
	}
	for _, r := range rss.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && owners[ref.UID] {
			w.replicaSets[r.Name] = string(r.UID)
			owners[r.UID] = true
		}
	}
	crs, err := client.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return w, err
	}
	for _, r := range crs.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && owners[ref.UID] {
			w.revisions[r.Name] = string(r.UID)
		}
	}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: echoSelector})
	if err != nil {
		return w, err
	}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		w.pods[p.Name] = fmt.Sprintf("%s restarts=%d", p.UID, restarts)
	}
	return w, nil
}

// writtenBySuperEdge: the object's fields are SuperEdge's controller's
// (an Update entry of its manager, none applied by ours, whose manager
// shares the name) and it carries no applied-hash of ours.
func writtenBySuperEdge(o metav1.Object) bool {
	if o.GetAnnotations()[appliedHash] != "" {
		return false
	}
	update := false
	for _, e := range o.GetManagedFields() {
		if e.Manager == superEdgeManager && e.Subresource == "" {
			if e.Operation == metav1.ManagedFieldsOperationApply {
				return false
			}
			update = true
		}
	}
	return update
}

// same: no workload replaced, added or restarted.
func (w gridWorkloads) same(now gridWorkloads) error {
	var diffs []string
	for _, c := range []struct {
		what     string
		was, now map[string]string
	}{{"pod", w.pods, now.pods}, {"ReplicaSet", w.replicaSets, now.replicaSets}, {"ControllerRevision", w.revisions, now.revisions}} {
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range c.was {
				if !yield(n) {
					return
				}
			}
			for n := range c.now {
				if _, ok := c.was[n]; !ok && !yield(n) {
					return
				}
			}
		})
		for _, n := range names {
			if c.was[n] != c.now[n] {
				diffs = append(diffs, fmt.Sprintf("%s %s: %q, now %q", c.what, n, c.was[n], c.now[n]))
			}
		}
	}
	if diffs != nil {
		return fmt.Errorf("%s", strings.Join(diffs, "; "))
	}
	return nil
}

// takenOver: every grid Deployment, StatefulSet and the grid Service carry
// our controller's applied-hash.
func takenOver(ctx context.Context, client kubernetes.Interface) error {
	sel := metav1.ListOptions{LabelSelector: "superedge.io/grid-selector"}
	var objs []metav1.Object
	deps, err := client.AppsV1().Deployments("default").List(ctx, sel)
	if err != nil {
		return err
	}
	for i := range deps.Items {
		objs = append(objs, &deps.Items[i])
	}
	stss, err := client.AppsV1().StatefulSets("default").List(ctx, sel)
	if err != nil {
		return err
	}
	for i := range stss.Items {
		objs = append(objs, &stss.Items[i])
	}
	svc, err := client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
	if err != nil {
		return err
	}
	objs = append(objs, svc)
	for _, o := range objs {
		if o.GetAnnotations()[appliedHash] == "" {
			return fmt.Errorf("%s has no %s", o.GetName(), appliedHash)
		}
	}
	return nil
}

// daemonSetsIdle: each DaemonSet (namespace/name) exists and runs no pod.
func daemonSetsIdle(ctx context.Context, client kubernetes.Interface, keys ...string) error {
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ds.Status.DesiredNumberScheduled != 0 || ds.Status.CurrentNumberScheduled != 0 {
			return fmt.Errorf("%s: %d desired, %d scheduled; want none", key, ds.Status.DesiredNumberScheduled, ds.Status.CurrentNumberScheduled)
		}
	}
	return nil
}

// rolledBackEnv is the variable the rollback check adds to the
// DeploymentGrid's template.
const rolledBackEnv = "ROLLED_BACK"

// rolledBack changes the DeploymentGrid's template after the rollback and
// waits until every nodeunit's Deployment has it and has rolled its pods
// to it (none of the earlier template left): SuperEdge's controller
// manages the grids again.
func rolledBack(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op":"add","path":"/spec/template/template/spec/containers/0/env/-","value":{"name":%q,"value":"yes"}}]`, rolledBackEnv)
	if err := client.CoreV1().RESTClient().Patch(types.JSONPatchType).AbsPath("/apis/superedge.io/v1/namespaces/default/deploymentgrids/deploymentgrid-demo").Body([]byte(patch)).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 0, "SuperEdge's controller applied a template change made after the rollback to every nodeunit's Deployment", func(ctx context.Context) error {
		for _, u := range []string{"nodeunit1", "nodeunit2"} {
			d, err := client.AppsV1().Deployments("default").Get(ctx, "deploymentgrid-demo-"+u, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == rolledBackEnv }) {
				return fmt.Errorf("%s has no %s yet", d.Name, rolledBackEnv)
			}
			if err := rolledOut(d); err != nil {
				return err
			}
		}
		return nil
	})
}

// rolledOut: the Deployment's controller has seen its spec and every
// replica is of the current template and available, none of an older one
// left (kubectl rollout status's test).
func rolledOut(d *appsv1.Deployment) error {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.Replicas != want || st.AvailableReplicas != want {
		return fmt.Errorf("%s rolling out: generation %d observed %d, %d replicas, %d updated, %d available; want %d", d.Name, d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, want)
	}
	return nil
}

// TestSuperEdgeChecks: the takeover's and the rollback's judgements of
// what the real-node run reads (no cluster).
func TestSuperEdgeChecks(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op}
	}
	for _, c := range []struct {
		name   string
		obj    metav1.ObjectMeta
		bySE   bool
		reason string
	}{
		{"SuperEdge's Update", metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{entry(superEdgeManager, metav1.ManagedFieldsOperationUpdate)}}, true, ""},
		{"ours applied under the same name", metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{entry(superEdgeManager, metav1.ManagedFieldsOperationUpdate), entry(superEdgeManager, metav1.ManagedFieldsOperationApply)}}, false, "an Apply entry is ours"},
		{"our applied-hash", metav1.ObjectMeta{Annotations: map[string]string{appliedHash: "x"}, ManagedFields: []metav1.ManagedFieldsEntry{entry(superEdgeManager, metav1.ManagedFieldsOperationUpdate)}}, false, "the annotation is ours"},
		{"kubectl's", metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{entry("kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate)}}, false, "no entry of SuperEdge's"},
	} {
		if got := writtenBySuperEdge(&c.obj); got != c.bySE {
			t.Errorf("%s: writtenBySuperEdge = %v, want %v (%s)", c.name, got, c.bySE, c.reason)
		}
	}

	was := gridWorkloads{pods: map[string]string{"a": "u1 restarts=0"}, replicaSets: map[string]string{"rs": "u2"}, revisions: map[string]string{}}
	if err := was.same(gridWorkloads{pods: map[string]string{"a": "u1 restarts=0"}, replicaSets: map[string]string{"rs": "u2"}, revisions: map[string]string{}}); err != nil {
		t.Errorf("the same workloads differ: %v", err)
	}
	for name, now := range map[string]gridWorkloads{
		"a restart":          {pods: map[string]string{"a": "u1 restarts=1"}, replicaSets: map[string]string{"rs": "u2"}},
		"a pod replaced":     {pods: map[string]string{"b": "u3 restarts=0"}, replicaSets: map[string]string{"rs": "u2"}},
		"a new revision":     {pods: map[string]string{"a": "u1 restarts=0"}, replicaSets: map[string]string{"rs": "u2"}, revisions: map[string]string{"r": "u4"}},
		"a ReplicaSet added": {pods: map[string]string{"a": "u1 restarts=0"}, replicaSets: map[string]string{"rs": "u2", "rs2": "u5"}},
	} {
		if err := was.same(now); err == nil {
			t.Errorf("%s: no difference found", name)
		}
	}

	three := int32(3)
	d := func(gen, observed int64, replicas, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: &three},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available},
		}
	}
	if err := rolledOut(d(2, 2, 3, 3, 3)); err != nil {
		t.Errorf("a finished rollout: %v", err)
	}
	for name, dep := range map[string]*appsv1.Deployment{
		"spec not yet seen":       d(2, 1, 3, 3, 3),
		"old replicas left":       d(2, 2, 4, 3, 3),
		"new ones not available":  d(2, 2, 3, 3, 2),
		"not all of the template": d(2, 2, 3, 2, 3),
	} {
		if err := rolledOut(dep); err == nil {
			t.Errorf("%s: taken for rolled out", name)
		}
	}
}

// proxyRulesInUnit waits until the kube-proxy on node n (iptables mode:
// edge-kube-proxy's) balances the grid's Service over exactly the pods of
// unit (pods: the ready ones by name), read from the node's own rules.
func proxyRulesInUnit(ctx context.Context, t *testing.T, n *Node, unit string, pods map[string]corev1.Pod) {
	t.Helper()
	var want []string
	for name := range podsInUnit(pods, unit) {
		want = append(want, pods[name].Status.PodIP)
	}
	slices.Sort(want)
	eventually(ctx, t, 0, n.Name+": kube-proxy's rules balance "+gridService+" over exactly "+unit+"'s pods "+fmt.Sprint(want), func(ctx context.Context) error {
		rules, err := n.Net.NS.Run(ctx, "iptables-save")
		if err != nil {
			return err
		}
		if got := harness.ProxyEndpoints(harness.ProxyModeIPTables, rules, "default", gridService); !slices.Equal(got, want) {
			return fmt.Errorf("rules list %v", got)
		}
		return nil
	})
}
