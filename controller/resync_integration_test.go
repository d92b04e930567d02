package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestResyncOfUnchangedWorldWritesNothing counts every write request the
// controller's client sends while informer resyncs re-reconcile converged
// grids of all three kinds (SuperEdge's templates, whose env fieldRefs the
// apiserver defaults inside atomic fields): there must be none.
func TestResyncOfUnchangedWorldWritesNothing(t *testing.T) {
	// Not parallel: it counts reconciles on the process-wide metric, which
	// another test's controller would add to.
	e := newEnv(t, controlplane.Options{})
	e.node(t, "node0", map[string]string{"zone1": "nodeunit1"})
	e.node(t, "node1", map[string]string{"zone1": "nodeunit2"})
	_, wc, _ := e.startController(t, func(o *Options) { o.Resync = time.Second })

	dg, ssg, sg := e.createExamples(t)
	testwait.Eventually(t.Context(), t, 30*time.Second, "all grids converged", func(ctx context.Context) error {
		d, err := e.grids.SuperedgeV1().DeploymentGrids("default").Get(ctx, dg.Name, metav1.GetOptions{})
		if err != nil || d.Status.NodeUnits != 2 || d.Status.ObservedGeneration != d.Generation {
			return fmt.Errorf("deploymentgrid %+v %v", d.Status, err)
		}
		s, err := e.grids.SuperedgeV1().StatefulSetGrids("default").Get(ctx, ssg.Name, metav1.GetOptions{})
		if err != nil || s.Status.NodeUnits != 2 || s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("statefulsetgrid %+v %v", s.Status, err)
		}
		for _, v := range []string{"nodeunit1", "nodeunit2"} {
			c, err := e.kube.AppsV1().StatefulSets("default").Get(ctx, ssg.Name+"-"+v, metav1.GetOptions{})
			if err != nil || c.Labels[superedgev1.LabelGridNodeUnit] != v {
				return fmt.Errorf("child statefulset for %s not labelled with its nodeunit: %v %v", v, c.Labels, err)
			}
		}
		g, err := e.grids.SuperedgeV1().ServiceGrids("default").Get(ctx, sg.Name, metav1.GetOptions{})
		if err != nil || g.Status.ClusterIP == "" {
			return fmt.Errorf("servicegrid %+v %v", g.Status, err)
		}
		return nil
	})
	// Wait until the writes caused by convergence itself are over.
	quiet(t, wc, 2*time.Second, 30*time.Second)
	wc.reset()

	// Every resync re-reconciles each grid; let a few rounds pass.
	start := map[string]float64{}
	kinds := []string{"DeploymentGrid", "StatefulSetGrid", "ServiceGrid"}
	for _, k := range kinds {
		start[k] = reconciles(k)
	}
	testwait.Eventually(t.Context(), t, 30*time.Second, "three resync rounds of every kind", func(context.Context) error {
		for _, k := range kinds {
			if n := reconciles(k) - start[k]; n < 3 {
				return fmt.Errorf("%s: %v reconciles", k, n)
			}
		}
		return nil
	})
	if w := wc.list(nil); len(w) != 0 {
		t.Fatalf("an unchanged world was written to on resync: %d writes: %v", len(w), w)
	}
}

// quiet waits until the counter has seen no new write for period.
func quiet(t testing.TB, wc *writeCounter, period, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last, since := len(wc.list(nil)), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if n := len(wc.list(nil)); n != last {
			last, since = n, time.Now()
			continue
		}
		if time.Since(since) >= period {
			return
		}
	}
	t.Fatalf("writes did not stop within %s: %v", timeout, wc.list(nil))
}

// reconciles reads the successful reconcile count of kind.
func reconciles(kind string) float64 {
	m := &dto.Metric{}
	if err := reconcileTotal.WithLabelValues(kind, "success").Write(m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// TestEditOfVerifiedChildIsUndone: a child the controller has already found
// up to date (resyncs passed) and that someone then edits is put back: the
// controller remembers only child versions it compared, never a child.
func TestEditOfVerifiedChildIsUndone(t *testing.T) {
	// Not parallel: it counts reconciles on the process-wide metric.
	e := newEnv(t, controlplane.Options{})
	e.node(t, "node0", map[string]string{"zone": "north"})
	_, wc, _ := e.startController(t, func(o *Options) { o.Resync = time.Second })
	ctx := t.Context()
	const ns = "verified"
	e.namespace(t, ns)
	dg := simpleDeploymentGrid(ns, "web", "zone", nil)
	if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(ctx, dg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(ctx, t, 30*time.Second, "web-north made", func(ctx context.Context) error {
		_, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-north", metav1.GetOptions{})
		return err
	})
	quiet(t, wc, 2*time.Second, 30*time.Second)
	start := reconciles("DeploymentGrid")
	testwait.Eventually(ctx, t, 30*time.Second, "three resyncs of the converged grid", func(context.Context) error {
		if n := reconciles("DeploymentGrid") - start; n < 3 {
			return fmt.Errorf("%v reconciles", n)
		}
		return nil
	})

	edit := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"echo","image":"registry.example/echo:someone-else"}]}}}}`)
	if _, err := e.kube.AppsV1().Deployments(ns).Patch(ctx, "web-north", types.StrategicMergePatchType, edit, metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(ctx, t, 30*time.Second, "the edited image put back", func(ctx context.Context) error {
		d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-north", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example/echo:1" {
			return fmt.Errorf("image %s", img)
		}
		return nil
	})
}
