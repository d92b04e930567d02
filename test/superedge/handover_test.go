package superedge

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
)

const (
	ns       = "default"
	gridKey  = "zone1"
	dgName   = "deploymentgrid-demo"
	ssgName  = "statefulsetgrid-demo"
	svcName  = "servicegrid-demo-svc"
	hashKey  = "superedge.io/template-hash-key"
	rollback = "ROLLED_BACK"
	// appliedHash is what our controller writes on each child (controller.AnnotationAppliedHash).
	appliedHash = "superedge.io/applied-hash"
)

var units = []string{"nodeunit1", "nodeunit2"}

// workloads is what a takeover or a return must leave alone: every
// ReplicaSet, ControllerRevision and pod of the grids (by UID) and the
// grid Service's UID and clusterIP.
type workloads struct {
	replicaSets, revisions, pods []string
	service                      string
}

func snapshot(ctx context.Context, kube kubernetes.Interface) (workloads, error) {
	var w workloads
	// The namespace holds only the grids' workloads (ReplicaSets and
	// revisions carry their pods' labels, not the grid's).
	all := metav1.ListOptions{}
	rs, err := kube.AppsV1().ReplicaSets(ns).List(ctx, all)
	if err != nil {
		return w, err
	}
	for _, r := range rs.Items {
		w.replicaSets = append(w.replicaSets, r.Name+"/"+string(r.UID))
	}
	crs, err := kube.AppsV1().ControllerRevisions(ns).List(ctx, all)
	if err != nil {
		return w, err
	}
	for _, r := range crs.Items {
		w.revisions = append(w.revisions, r.Name+"/"+string(r.UID))
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, all)
	if err != nil {
		return w, err
	}
	for _, p := range pods.Items {
		w.pods = append(w.pods, p.Name+"/"+string(p.UID))
	}
	svc, err := kube.CoreV1().Services(ns).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return w, err
	}
	w.service = string(svc.UID) + " " + svc.Spec.ClusterIP
	for _, s := range [][]string{w.replicaSets, w.revisions, w.pods} {
		slices.Sort(s)
	}
	return w, nil
}

func (w workloads) diff(o workloads) error {
	var d []string
	for _, c := range []struct {
		what     string
		was, now []string
	}{{"ReplicaSets", w.replicaSets, o.replicaSets}, {"ControllerRevisions", w.revisions, o.revisions}, {"pods", w.pods, o.pods}} {
		if !slices.Equal(c.was, c.now) {
			d = append(d, fmt.Sprintf("%s were %v, now %v", c.what, c.was, c.now))
		}
	}
	if w.service != o.service {
		d = append(d, fmt.Sprintf("Service %s was %s, now %s", svcName, w.service, o.service))
	}
	if d != nil {
		return fmt.Errorf("%s", strings.Join(d, "; "))
	}
	return nil
}

// TestSuperEdgeHandover: SuperEdge's own controller makes the demo grids'
// children (and writes back into the grids, and applies its CRDs); this
// project's controller takes them over with no ReplicaSet, revision, pod or
// Service replaced; then SuperEdge's controller comes back, again rolling
// nothing, and a template change made afterwards is applied by it.
func TestSuperEdgeHandover(t *testing.T) {
	t.Parallel() // its own control plane and SuperEdge root
	e := newEnv(t)
	ctx := e.ctx

	// SuperEdge's controller, as its manifest runs it.
	se := e.startSuperEdge(t, "superedge-1")
	seCRDs := superEdgeCRDs(t, e.build)
	testwait.Eventually(ctx, t, 0, "SuperEdge's controller created its grid CRDs", func(ctx context.Context) error {
		if err := se.running(); err != nil {
			return err
		}
		return crdsAre(ctx, e.ext, seCRDs)
	})
	for _, f := range []string{"deploymentgrid.yaml", "statefulsetgrid.yaml", "servicegrid.yaml"} {
		e.kubectl(t, "apply", "-f", filepath.Join(e.repo, "examples", f))
	}
	testwait.Eventually(ctx, t, 0, "SuperEdge's controller made every nodeunit's Deployment and StatefulSet, the grid Service, and their ReplicaSets and pods", func(ctx context.Context) error {
		if err := se.running(); err != nil {
			return err
		}
		return childrenMade(ctx, e.kube)
	})
	// What SuperEdge wrote back into the grids' specs.
	testwait.Eventually(ctx, t, 0, "SuperEdge's controller wrote defaultTemplateName and the template-hash label back into the DeploymentGrid", func(ctx context.Context) error {
		dg, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, dgName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if dg.Spec.DefaultTemplateName != superedgev1.DefaultTemplateName || dg.Spec.Template.Template.Labels[hashKey] == "" {
			return fmt.Errorf("defaultTemplateName %q, template labels %v", dg.Spec.DefaultTemplateName, dg.Spec.Template.Template.Labels)
		}
		return nil
	})
	before := settled(ctx, t, e.kube)
	t.Logf("made by SuperEdge's controller: %d ReplicaSets, %d ControllerRevisions, %d pods, Service %s", len(before.replicaSets), len(before.revisions), len(before.pods), before.service)
	dgBefore, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, dgName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// build/MIGRATION.md: SuperEdge's controller stops, our CRDs replace
	// its (server-side, taking its fields over), ours starts.
	se.Stop(10 * time.Second)
	crdArgs := []string{"apply", "--server-side", "--force-conflicts"}
	for _, k := range []string{"deploymentgrids", "statefulsetgrids", "servicegrids", "nodelabelsummaries"} {
		crdArgs = append(crdArgs, "-f", filepath.Join(e.repo, "build/crds/superedge.io_"+k+".yaml"))
	}
	e.kubectl(t, crdArgs...)
	our := e.startOurs(t, "servicegroup")
	testwait.Eventually(ctx, t, 0, "our controller took every child over (its applied-hash on each)", func(ctx context.Context) error {
		if done, err := our.Exited(); done {
			return fmt.Errorf("our controller exited: %v\n%s", err, our.LogTail(20))
		}
		return takenOver(ctx, e.kube)
	})
	after := settled(ctx, t, e.kube)
	if err := before.diff(after); err != nil {
		t.Errorf("the takeover replaced workloads: %v", err)
	}
	dgAfter, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, dgName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(dgBefore.Spec, dgAfter.Spec) {
		t.Errorf("our controller changed the grid's spec (it never writes one):\nbefore %+v\nafter  %+v", dgBefore.Spec, dgAfter.Spec)
	}

	// build/MIGRATION.md's rollback: ours stops, SuperEdge's starts again.
	our.Stop(10 * time.Second)
	se2 := e.startSuperEdge(t, "superedge-2")
	testwait.Eventually(ctx, t, 0, "SuperEdge's controller, back, put its own CRDs back", func(ctx context.Context) error {
		if err := se2.running(); err != nil {
			return err
		}
		return crdsAre(ctx, e.ext, seCRDs)
	})
	back := settled(ctx, t, e.kube)
	if err := before.diff(back); err != nil {
		t.Errorf("SuperEdge's controller, back, replaced workloads: %v", err)
	}
	// A template change after the rollback: SuperEdge's controller applies it.
	patch := fmt.Sprintf(`[{"op":"add","path":"/spec/template/template/spec/containers/0/env/-","value":{"name":%q,"value":"yes"}}]`, rollback)
	if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Patch(ctx, dgName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(ctx, t, 0, "SuperEdge's controller applied the template change to every nodeunit's Deployment", func(ctx context.Context) error {
		if err := se2.running(); err != nil {
			return err
		}
		for _, u := range units {
			d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, dgName+"-"+u, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == rollback }) {
				return fmt.Errorf("%s has no %s in its pod template", d.Name, rollback)
			}
		}
		return nil
	})
}

// TestSuperEdgeLeaderLock: SuperEdge's controller run with --leader-elect
// holds its lock (kube-system/application-grid-controller, an Endpoints
// object as client-go v0.22 keeps it); ours, started beside it, does not
// reconcile (PredecessorActive Event on the lock) until SuperEdge's stops,
// then takes the grid over once the lock is no longer renewed.
func TestSuperEdgeLeaderLock(t *testing.T) {
	t.Parallel() // its own control plane and SuperEdge root
	e := newEnv(t)
	ctx := e.ctx
	se := e.startSuperEdge(t, "superedge", "--leader-elect")
	testwait.Eventually(ctx, t, 0, "SuperEdge's controller holds its lock and created its CRDs", func(ctx context.Context) error {
		if err := se.running(); err != nil {
			return err
		}
		//nolint:staticcheck // SuperEdge's lock kind
		ep, err := e.kube.CoreV1().Endpoints("kube-system").Get(ctx, "application-grid-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !strings.Contains(ep.Annotations["control-plane.alpha.kubernetes.io/leader"], "holderIdentity") {
			return fmt.Errorf("lock annotations %v", ep.Annotations)
		}
		return crdsAre(ctx, e.ext, superEdgeCRDs(t, e.build))
	})
	e.kubectl(t, "apply", "-f", filepath.Join(e.repo, "examples", "deploymentgrid.yaml"))
	our := e.startOurs(t, "servicegroup")
	testwait.Eventually(ctx, t, 0, "our controller reports SuperEdge's live lock (Warning PredecessorActive)", func(ctx context.Context) error {
		if done, err := our.Exited(); done {
			return fmt.Errorf("our controller exited: %v", err)
		}
		evs, err := e.kube.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "reason=PredecessorActive"})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return fmt.Errorf("no PredecessorActive Event in kube-system")
		}
		return nil
	})
	// SuperEdge's controller makes the children on its own time: our
	// controller's Event says nothing of that.
	for _, u := range units {
		var d *appsv1.Deployment
		testwait.Eventually(ctx, t, 0, "SuperEdge's controller makes "+dgName+"-"+u, func(ctx context.Context) error {
			var err error
			d, err = e.kube.AppsV1().Deployments(ns).Get(ctx, dgName+"-"+u, metav1.GetOptions{})
			return err
		})
		if h := d.Annotations[appliedHash]; h != "" {
			t.Errorf("%s carries our %s=%s while SuperEdge's controller leads", d.Name, appliedHash, h)
		}
	}
	stopped := time.Now()
	se.Stop(10 * time.Second)
	testwait.Eventually(ctx, t, 0, "our controller took the grid over after SuperEdge's stopped", func(ctx context.Context) error {
		for _, u := range units {
			d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, dgName+"-"+u, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Annotations[appliedHash] == "" {
				return fmt.Errorf("%s not taken over yet", d.Name)
			}
		}
		return nil
	})
	t.Logf("our controller took over %s after SuperEdge's stopped (its lease: 15 s)", time.Since(stopped).Round(time.Second))
}

// settled waits until the grids' workloads stop changing (kube-controller-
// manager has made every ReplicaSet's pods) and returns them.
func settled(ctx context.Context, t *testing.T, kube kubernetes.Interface) workloads {
	t.Helper()
	var last workloads
	var since time.Time
	testwait.Eventually(ctx, t, 0, "the grids' workloads unchanged for 10 s", func(ctx context.Context) error {
		w, err := snapshot(ctx, kube)
		if err != nil {
			return err
		}
		if w.diff(last) != nil {
			last, since = w, time.Now()
		}
		if d := time.Since(since); d < 10*time.Second {
			return fmt.Errorf("changed %s ago", d.Round(time.Second))
		}
		return nil
	})
	return last
}

// childrenMade: every nodeunit's Deployment (with its ReplicaSet and two
// pods) and StatefulSet (with its revision), and the grid Service.
func childrenMade(ctx context.Context, kube kubernetes.Interface) error {
	for _, u := range units {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, dgName+"-"+u, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Spec.Template.Spec.NodeSelector[gridKey] != u {
			return fmt.Errorf("%s: nodeSelector %v", d.Name, d.Spec.Template.Spec.NodeSelector)
		}
		if _, err := kube.AppsV1().StatefulSets(ns).Get(ctx, ssgName+"-"+u, metav1.GetOptions{}); err != nil {
			return err
		}
	}
	svc, err := kube.CoreV1().Services(ns).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if svc.Annotations["topologyKeys"] == "" {
		return fmt.Errorf("%s has no topologyKeys annotation: %v", svc.Name, svc.Annotations)
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "appGrid=echo"})
	if err != nil {
		return err
	}
	if len(pods.Items) < 4 {
		return fmt.Errorf("%d of the Deployments' 4 pods", len(pods.Items))
	}
	return nil
}

// takenOver: each child carries our controller's applied-hash annotation.
func takenOver(ctx context.Context, kube kubernetes.Interface) error {
	var objs []metav1.Object
	for _, u := range units {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, dgName+"-"+u, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s, err := kube.AppsV1().StatefulSets(ns).Get(ctx, ssgName+"-"+u, metav1.GetOptions{})
		if err != nil {
			return err
		}
		objs = append(objs, d, s)
	}
	svc, err := kube.CoreV1().Services(ns).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	objs = append(objs, svc)
	for _, o := range objs {
		if o.GetAnnotations()[appliedHash] == "" {
			return fmt.Errorf("%s has no %s yet (annotations %v)", o.GetName(), appliedHash, o.GetAnnotations())
		}
	}
	return nil
}

// superEdgeCRDs are the grid CRDs of SuperEdge's release, by name.
func superEdgeCRDs(t testing.TB, b *Build) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	entries, err := os.ReadDir(b.Manifests)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(b.Manifests, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[crd.Name] = crd
	}
	if len(out) != 3 {
		t.Fatalf("%s: %d CRDs, want SuperEdge's 3: %v", b.Manifests, len(out), slices.Collect(maps.Keys(out)))
	}
	return out
}

// crdsAre: each live grid CRD has want's schema and is Established.
func crdsAre(ctx context.Context, ext apiextensionsclient.Interface, want map[string]*apiextensionsv1.CustomResourceDefinition) error {
	for name, w := range want {
		live, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(live.Spec.Versions) != len(w.Spec.Versions) || !equality.Semantic.DeepEqual(live.Spec.Versions[0].Schema, w.Spec.Versions[0].Schema) {
			return fmt.Errorf("%s: not SuperEdge's schema", name)
		}
		established := false
		for _, c := range live.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			return fmt.Errorf("%s not Established", name)
		}
	}
	return nil
}
