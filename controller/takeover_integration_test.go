package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// superEdgeUserAgent is what SuperEdge's application-grid-controller sent:
// client-go's default user agent for its binary. The apiserver names the
// field manager of its Create/Update/Patch calls after the part before "/".
const superEdgeUserAgent = "application-grid-controller/v0.7.0 (linux/amd64) kubernetes/$Format"

// superEdgeClient writes as SuperEdge's controller did.
func (e *env) superEdgeClient() kubernetes.Interface {
	cfg := rest.CopyConfig(e.cp.Config)
	cfg.UserAgent = superEdgeUserAgent
	return kubernetes.NewForConfigOrDie(cfg)
}

// superEdgeLabels are the labels SuperEdge's CreateDeployment/CreateStatefulSet
// put on a child: the grid's own labels plus the two grid labels, the key verbatim.
func superEdgeLabels(grid metav1.Object, key string) map[string]string {
	l := maps.Clone(grid.GetLabels())
	if l == nil {
		l = map[string]string{}
	}
	l[superedgev1.LabelGridSelector] = grid.GetName()
	l[superedgev1.LabelGridUniqKey] = key
	return l
}

// superEdgePodTemplate is SuperEdge's child pod template: the grid's, with
// the nodeSelector entry added.
func superEdgePodTemplate(t corev1.PodTemplateSpec, key, value string) corev1.PodTemplateSpec {
	t = *t.DeepCopy()
	if t.Spec.NodeSelector == nil {
		t.Spec.NodeSelector = map[string]string{}
	}
	t.Spec.NodeSelector[key] = value
	return t
}

// TestTakeoverFromSuperEdge: children made by SuperEdge's controller (its
// names, labels, controller reference, the template-hash label it wrote back
// into the grid's template, its field manager) are taken over, each
// StatefulSet labelled with its nodeunit value, with no new
// ReplicaSet, no new StatefulSet revision and no pod replaced; afterwards a
// field removed from the grid leaves the child, which proves the field
// ownership moved to this controller.
func TestTakeoverFromSuperEdge(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{ControllerManager: true})
	ctx := t.Context()
	const ns, key = "default", "zone1"
	e.node(t, "node0", map[string]string{key: "nodeunit1"})
	e.node(t, "node1", map[string]string{key: "nodeunit2"})
	values := []string{"nodeunit1", "nodeunit2"}

	// The grids as SuperEdge left them: it wrote defaultTemplateName and the
	// template-hash label back into the spec.
	dg := simpleDeploymentGrid(ns, "web", key, ptrInt32(2))
	dg.Spec.DefaultTemplateName = superedgev1.DefaultTemplateName
	dg.Spec.Template.Template.Labels["superedge.io/template-hash-key"] = "5d8f7c6b9"
	dg.Spec.Template.Template.Spec.Containers[0].Env = append(dg.Spec.Template.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: "GREETING", Value: "hello"})
	dg, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(ctx, dg, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ssg := &superedgev1.StatefulSetGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: superedgev1.StatefulSetGridSpec{GridUniqKey: key, WorkloadGridSpecCommon: superedgev1.WorkloadGridSpecCommon{DefaultTemplateName: superedgev1.DefaultTemplateName}, Template: appsv1.StatefulSetSpec{
			Replicas:    ptrInt32(1),
			ServiceName: "db-svc",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template:    podTemplate("db", "registry.example/db:1"),
		}},
	}
	ssg.Spec.Template.Template.Labels["superedge.io/template-hash-key"] = "7c9d5f8"
	ssg, err = e.grids.SuperedgeV1().StatefulSetGrids(ns).Create(ctx, ssg, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// SuperEdge's children, written the way its controller wrote them.
	se := e.superEdgeClient()
	dgRef := metav1.NewControllerRef(dg, superedgev1.SchemeGroupVersion.WithKind("DeploymentGrid"))
	ssgRef := metav1.NewControllerRef(ssg, superedgev1.SchemeGroupVersion.WithKind("StatefulSetGrid"))
	for _, v := range values {
		spec := *dg.Spec.Template.DeepCopy()
		spec.Template = superEdgePodTemplate(spec.Template, key, v)
		_, err := se.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + v, Labels: superEdgeLabels(dg, key), OwnerReferences: []metav1.OwnerReference{*dgRef}},
			Spec:       spec,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sspec := *ssg.Spec.Template.DeepCopy()
		sspec.Template = superEdgePodTemplate(sspec.Template, key, v)
		_, err = se.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-" + v, Labels: superEdgeLabels(ssg, key), OwnerReferences: []metav1.OwnerReference{*ssgRef}},
			Spec:       sspec,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	// SuperEdge's Service: created without an owner, then adopted by a patch
	// (its ServiceControllerRefManager), both as SuperEdge's manager.
	sg := &superedgev1.ServiceGrid{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	sg.Spec.GridUniqKey = key
	sg.Spec.Template = corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}
	sg, err = e.grids.SuperedgeV1().ServiceGrids(ns).Create(ctx, sg, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := se.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-svc", Labels: superEdgeLabels(sg, key),
			Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: `["zone1"]`}},
		Spec: *sg.Spec.Template.DeepCopy(),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adopt := fmt.Appendf(nil, `{"metadata":{"ownerReferences":[%s],"uid":%q}}`,
		mustJSON(metav1.NewControllerRef(sg, superedgev1.SchemeGroupVersion.WithKind("ServiceGrid"))), svc.UID)
	if svc, err = se.CoreV1().Services(ns).Patch(ctx, svc.Name, types.StrategicMergePatchType, adopt, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// kube-controller-manager runs them: ReplicaSets, revisions, pods.
	var before world
	testwait.Eventually(t.Context(), t, time.Minute, "SuperEdge's children running under kube-controller-manager", func(ctx context.Context) error {
		w, err := e.observe(ctx, ns, values)
		if err != nil {
			return err
		}
		if len(w.replicaSets) != 2 || len(w.revisions) != 2 || len(w.pods) != 2*2+2 {
			return fmt.Errorf("%d ReplicaSets, %d revisions, %d pods", len(w.replicaSets), len(w.revisions), len(w.pods))
		}
		before = w
		return nil
	})

	_, _, _ = e.startController(t, nil)

	// Taken over: our annotations are there, SuperEdge's Update entry is
	// gone, and the workload controllers have seen the result.
	testwait.Eventually(t.Context(), t, time.Minute, "children taken over and observed", func(ctx context.Context) error {
		for _, v := range values {
			d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-"+v, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := takenOver(d, key); err != nil {
				return fmt.Errorf("deployment %s: %w", d.Name, err)
			}
			if d.Status.ObservedGeneration < d.Generation {
				return fmt.Errorf("deployment %s generation %d not observed yet", d.Name, d.Generation)
			}
			s, err := e.kube.AppsV1().StatefulSets(ns).Get(ctx, "db-"+v, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := takenOver(s, key); err != nil {
				return fmt.Errorf("statefulset %s: %w", s.Name, err)
			}
			if got := s.Labels[superedgev1.LabelGridNodeUnit]; got != v {
				return fmt.Errorf("statefulset %s: nodeunit label %q, want %q", s.Name, got, v)
			}
			if s.Status.ObservedGeneration < s.Generation {
				return fmt.Errorf("statefulset %s generation %d not observed yet", s.Name, s.Generation)
			}
		}
		return nil
	})
	after, err := e.observe(ctx, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before.replicaSets, after.replicaSets) {
		t.Errorf("ReplicaSets changed: %v -> %v", before.replicaSets, after.replicaSets)
	}
	if !maps.Equal(before.revisions, after.revisions) {
		t.Errorf("ControllerRevisions changed: %v -> %v", before.revisions, after.revisions)
	}
	if !maps.Equal(before.pods, after.pods) {
		t.Errorf("pods replaced: %v -> %v", before.pods, after.pods)
	}
	for name, tmpl := range before.templates {
		if !apiequality.Semantic.DeepEqual(tmpl, after.templates[name]) {
			t.Errorf("%s: pod template changed:\n%+v\n->\n%+v", name, tmpl, after.templates[name])
		}
	}

	testwait.Eventually(t.Context(), t, 30*time.Second, "Service taken over", func(ctx context.Context) error {
		got, err := e.kube.CoreV1().Services(ns).Get(ctx, "web-svc", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.UID != svc.UID || got.Spec.ClusterIP != svc.Spec.ClusterIP || !slices.Equal(got.Spec.ClusterIPs, svc.Spec.ClusterIPs) {
			return fmt.Errorf("service replaced or re-addressed: %s %v -> %s %v", svc.UID, svc.Spec.ClusterIPs, got.UID, got.Spec.ClusterIPs)
		}
		return takenOver(got, key)
	})

	t.Run("a field removed from the grid leaves the child", func(t *testing.T) {
		e.updateDeploymentGrid(t, ns, "web", func(g *superedgev1.DeploymentGrid) {
			c := &g.Spec.Template.Template.Spec.Containers[0]
			c.Env = slices.DeleteFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == "GREETING" })
		})
		testwait.Eventually(t.Context(), t, 30*time.Second, "GREETING gone from every child", func(ctx context.Context) error {
			for _, v := range values {
				d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-"+v, metav1.GetOptions{})
				if err != nil {
					return err
				}
				for _, env := range d.Spec.Template.Spec.Containers[0].Env {
					if env.Name == "GREETING" {
						return fmt.Errorf("%s still has GREETING", d.Name)
					}
				}
			}
			return nil
		})
	})
}

// takenOver: obj carries this controller's annotations, SuperEdge's labels,
// and no Update entry of the shared manager name is left.
func takenOver(obj metav1.Object, key string) error {
	if obj.GetAnnotations()[AnnotationAppliedHash] == "" || obj.GetAnnotations()[superedgev1.AnnotationGridUniqKey] != key {
		return fmt.Errorf("annotations %v", obj.GetAnnotations())
	}
	if obj.GetLabels()[superedgev1.LabelGridUniqKey] != key {
		return fmt.Errorf("labels %v", obj.GetLabels())
	}
	for _, m := range obj.GetManagedFields() {
		if m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationUpdate && m.Subresource == "" {
			return fmt.Errorf("fields still owned by an Update entry of %s", FieldManager)
		}
	}
	return nil
}

// world is what kube-controller-manager made from a grid's children.
type world struct {
	replicaSets map[string]types.UID // name -> UID
	revisions   map[string]types.UID
	pods        map[string]types.UID
	templates   map[string]corev1.PodTemplateSpec // child -> pod template
}

func (e *env) observe(ctx context.Context, ns string, values []string) (world, error) {
	w := world{replicaSets: map[string]types.UID{}, revisions: map[string]types.UID{}, pods: map[string]types.UID{}, templates: map[string]corev1.PodTemplateSpec{}}
	rss, err := e.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return w, err
	}
	for _, rs := range rss.Items {
		w.replicaSets[rs.Name] = rs.UID
	}
	revs, err := e.kube.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return w, err
	}
	for _, r := range revs.Items {
		w.revisions[r.Name] = r.UID
	}
	pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return w, err
	}
	for _, p := range pods.Items {
		w.pods[p.Name] = p.UID
	}
	for _, v := range values {
		d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-"+v, metav1.GetOptions{})
		if err != nil {
			return w, err
		}
		w.templates[d.Name] = d.Spec.Template
		s, err := e.kube.AppsV1().StatefulSets(ns).Get(ctx, "db-"+v, metav1.GetOptions{})
		if err != nil {
			return w, err
		}
		w.templates[s.Name] = s.Spec.Template
	}
	return w, nil
}

func ptrInt32(v int32) *int32 { return &v }
