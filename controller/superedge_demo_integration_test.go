package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestSuperEdgeDemo reproduces SuperEdge's demo with kube-controller-manager:
// node0 is nodeunit1, node1 and node2 are nodeunit2; the three example grids
// give deploymentgrid-demo-nodeunit1/2, statefulsetgrid-demo-nodeunit1/2 and
// servicegrid-demo-svc. Relabelling node0 moves its workload; deleting the
// grids garbage-collects every child.
func TestSuperEdgeDemo(t *testing.T) {
	// Not parallel: it counts reconciles on the process-wide metric, which
	// another test's controller would add to.
	e := newEnv(t, controlplane.Options{ControllerManager: true})
	ctx := t.Context()
	e.node(t, "node0", map[string]string{"zone1": "nodeunit1"})
	e.node(t, "node1", map[string]string{"zone1": "nodeunit2"})
	e.node(t, "node2", map[string]string{"zone1": "nodeunit2"})
	_, wc, _ := e.startController(t, func(o *Options) { o.Resync = time.Second })

	e.createExamples(t)

	e.waitDeployments(t, "default", "deploymentgrid-demo", "deploymentgrid-demo-nodeunit1", "deploymentgrid-demo-nodeunit2")
	testwait.Eventually(t.Context(), t, 20*time.Second, "StatefulSets and Service", func(ctx context.Context) error {
		for _, v := range []string{"nodeunit1", "nodeunit2"} {
			s, err := e.kube.AppsV1().StatefulSets("default").Get(ctx, "statefulsetgrid-demo-"+v, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.Spec.ServiceName != "servicegrid-demo-svc" || s.Spec.Template.Spec.NodeSelector["zone1"] != v || *s.Spec.Replicas != 3 {
				return fmt.Errorf("%s: serviceName %q nodeSelector %v", s.Name, s.Spec.ServiceName, s.Spec.Template.Spec.NodeSelector)
			}
			if len(s.Spec.Template.Labels) != 1 || s.Spec.Template.Labels["appGrid"] != "echo" {
				return fmt.Errorf("%s: pod template labels %v", s.Name, s.Spec.Template.Labels)
			}
		}
		svc, err := e.kube.CoreV1().Services("default").Get(ctx, "servicegrid-demo-svc", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := svc.Annotations[superedgev1.AnnotationTopologyKeys]; got != `["zone1"]` {
			return fmt.Errorf("topologyKeys %q", got)
		}
		if svc.Spec.Selector["appGrid"] != "echo" || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.IntValue() != 8080 {
			return fmt.Errorf("spec %+v", svc.Spec)
		}
		if svc.Labels[superedgev1.LabelGridUniqKey] != "zone1" {
			return fmt.Errorf("labels %v", svc.Labels)
		}
		g, err := e.grids.SuperedgeV1().ServiceGrids("default").Get(ctx, "servicegrid-demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if g.Status.ClusterIP == "" || g.Status.ClusterIP != svc.Spec.ClusterIP || g.Status.ServiceName != svc.Name {
			return fmt.Errorf("servicegrid status %+v", g.Status)
		}
		return nil
	})

	// The Deployment controller fills in the children's status; the grid mirrors it.
	testwait.Eventually(t.Context(), t, 30*time.Second, "DeploymentGrid status mirrors the Deployments", func(ctx context.Context) error {
		g, err := e.grids.SuperedgeV1().DeploymentGrids("default").Get(ctx, "deploymentgrid-demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, v := range []string{"nodeunit1", "nodeunit2"} {
			d, err := e.kube.AppsV1().Deployments("default").Get(ctx, "deploymentgrid-demo-"+v, metav1.GetOptions{})
			if err != nil {
				return err
			}
			st, ok := g.Status.States[v]
			if !ok || st.Replicas != 2 || st.Replicas != d.Status.Replicas || st.ObservedGeneration != d.Status.ObservedGeneration {
				return fmt.Errorf("state %s = %+v, deployment status %+v", v, st, d.Status)
			}
		}
		if g.Status.NodeUnits != 2 || g.Status.ReadyNodeUnits != 0 {
			return fmt.Errorf("nodeUnits %d ready %d (no kubelet: nothing is ready)", g.Status.NodeUnits, g.Status.ReadyNodeUnits)
		}
		if c := meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})

	t.Run("no writes on resync with real workload controllers", func(t *testing.T) {
		quiet(t, wc, 2*time.Second, 30*time.Second)
		wc.reset()
		before := reconciles("DeploymentGrid")
		testwait.Eventually(t.Context(), t, 30*time.Second, "two resync rounds", func(context.Context) error {
			if n := reconciles("DeploymentGrid") - before; n < 2 {
				return fmt.Errorf("%v reconciles", n)
			}
			return nil
		})
		if w := wc.list(nil); len(w) != 0 {
			t.Errorf("writes on resync: %v", w)
		}
	})

	t.Run("relabelling a node moves the workload", func(t *testing.T) {
		e.relabel(t, "node0", map[string]any{"zone1": "nodeunit3"})
		e.waitDeployments(t, "default", "deploymentgrid-demo", "deploymentgrid-demo-nodeunit2", "deploymentgrid-demo-nodeunit3")
		d, err := e.kube.AppsV1().Deployments("default").Get(ctx, "deploymentgrid-demo-nodeunit3", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Spec.NodeSelector["zone1"] != "nodeunit3" {
			t.Errorf("nodeSelector %v", d.Spec.Template.Spec.NodeSelector)
		}
	})

	t.Run("deleting the grids garbage-collects the children", func(t *testing.T) {
		if err := e.grids.SuperedgeV1().DeploymentGrids("default").Delete(ctx, "deploymentgrid-demo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.grids.SuperedgeV1().StatefulSetGrids("default").Delete(ctx, "statefulsetgrid-demo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.grids.SuperedgeV1().ServiceGrids("default").Delete(ctx, "servicegrid-demo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testwait.Eventually(t.Context(), t, 2*time.Minute, "children garbage-collected", func(ctx context.Context) error {
			names, err := e.deploymentNames(ctx, "default", "deploymentgrid-demo")
			if err != nil || len(names) > 0 {
				return fmt.Errorf("deployments %v (%v)", names, err)
			}
			for _, v := range []string{"nodeunit2", "nodeunit3"} {
				if _, err := e.kube.AppsV1().StatefulSets("default").Get(ctx, "statefulsetgrid-demo-"+v, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("statefulset %s: %v", v, err)
				}
			}
			if _, err := e.kube.CoreV1().Services("default").Get(ctx, "servicegrid-demo-svc", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("service: %v", err)
			}
			return nil
		})
	})
}
