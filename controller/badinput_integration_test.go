package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestBadInput: an empty gridUniqKey, nodeunit values that cannot name a
// child and names over the length limits give Warning Events and a
// Reconciled=False condition; other nodeunits proceed; nothing is deleted.
func TestBadInput(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	const ns = "bad"
	e.namespace(t, ns)
	e.node(t, "n1", map[string]string{"zone": "good"})
	e.node(t, "n2", map[string]string{"zone": "Bad_Unit"})
	e.node(t, "n3", map[string]string{"zone": "a-rather-long-unit"})
	e.startController(t, nil)

	// expectWarning waits for a Warning Event of reason on object name whose
	// message holds every part, and for the grid's Reconciled condition.
	expectWarning := func(t *testing.T, name, reason string, cond func(ctx context.Context) ([]metav1.Condition, error), parts ...string) {
		t.Helper()
		testwait.Eventually(t.Context(), t, 20*time.Second, fmt.Sprintf("Warning %s on %s mentioning %q", reason, name, parts), func(ctx context.Context) error {
			evs, err := e.warningEvents(ctx, ns, name, reason)
			if err != nil {
				return err
			}
			found := false
			for _, ev := range evs {
				ok := ev.Type == corev1.EventTypeWarning
				for _, p := range parts {
					ok = ok && strings.Contains(ev.Message, p)
				}
				found = found || ok
			}
			if !found {
				return fmt.Errorf("events: %v", evs)
			}
			conds, err := cond(ctx)
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(conds, superedgev1.ConditionReconciled)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
				return fmt.Errorf("Reconciled condition %+v", c)
			}
			return nil
		})
	}
	dgConds := func(name string) func(ctx context.Context) ([]metav1.Condition, error) {
		return func(ctx context.Context) ([]metav1.Condition, error) {
			g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return g.Status.Conditions, nil
		}
	}

	t.Run("empty gridUniqKey", func(t *testing.T) {
		if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(ctx, simpleDeploymentGrid(ns, "nokey", "", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectWarning(t, "nokey", ReasonEmptyGridUniqKey, dgConds("nokey"), "gridUniqKey")
		if names, err := e.deploymentNames(ctx, ns, "nokey"); err != nil || len(names) != 0 {
			t.Errorf("created %v (%v)", names, err)
		}
	})

	t.Run("value that cannot name a Deployment is skipped, others proceed", func(t *testing.T) {
		if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(ctx, simpleDeploymentGrid(ns, "mixed", "zone", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitDeployments(t, ns, "mixed", "mixed-good", "mixed-a-rather-long-unit")
		expectWarning(t, "mixed", ReasonInvalidChildName, dgConds("mixed"), `"Bad_Unit"`, "253")
	})

	t.Run("invalid input never deletes existing children", func(t *testing.T) {
		e.updateDeploymentGrid(t, ns, "mixed", func(g *superedgev1.DeploymentGrid) { g.Spec.GridUniqKey = "" })
		expectWarning(t, "mixed", ReasonEmptyGridUniqKey, dgConds("mixed"), "gridUniqKey")
		e.waitDeployments(t, ns, "mixed", "mixed-good", "mixed-a-rather-long-unit")
		g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, "mixed", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := g.Status.States["good"]; !ok || g.Status.NodeUnits != 2 {
			t.Errorf("status must still list the existing children: %+v", g.Status)
		}
	})

	t.Run("StatefulSet name over 52 characters is skipped", func(t *testing.T) {
		name := "s" + strings.Repeat("x", 32) // 33 + "-a-rather-long-unit" (19) = 52: fits; "-good" too
		longName := name + "yy"               // 54: only "-good" fits
		for _, n := range []string{name, longName} {
			ssg := &superedgev1.StatefulSetGrid{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
				Spec: superedgev1.StatefulSetGridSpec{GridUniqKey: "zone", Template: appsv1.StatefulSetSpec{
					ServiceName: "svc",
					Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "s"}},
					Template:    podTemplate("s", "registry.example/s:1"),
				}},
			}
			if _, err := e.grids.SuperedgeV1().StatefulSetGrids(ns).Create(ctx, ssg, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		testwait.Eventually(t.Context(), t, 20*time.Second, "StatefulSets of valid names only", func(ctx context.Context) error {
			for _, want := range []string{name + "-good", name + "-a-rather-long-unit", longName + "-good"} {
				if _, err := e.kube.AppsV1().StatefulSets(ns).Get(ctx, want, metav1.GetOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
		expectWarning(t, longName, ReasonInvalidChildName, func(ctx context.Context) ([]metav1.Condition, error) {
			g, err := e.grids.SuperedgeV1().StatefulSetGrids(ns).Get(ctx, longName, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if g.Status.NodeUnits != 1 {
				return nil, fmt.Errorf("nodeUnits %d", g.Status.NodeUnits)
			}
			return g.Status.Conditions, nil
		}, `"a-rather-long-unit"`, "52")
		list, err := e.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 3 {
			t.Errorf("want 3 StatefulSets, got %d", len(list.Items))
		}
	})

	t.Run("Service name over 63 characters", func(t *testing.T) {
		name := "g" + strings.Repeat("x", 59) // + "-svc" = 64
		sg := &superedgev1.ServiceGrid{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: superedgev1.ServiceGridSpec{GridUniqKey: "zone", Template: corev1.ServiceSpec{
				Selector: map[string]string{"app": "s"}, Ports: []corev1.ServicePort{{Port: 80}},
			}},
		}
		if _, err := e.grids.SuperedgeV1().ServiceGrids(ns).Create(ctx, sg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectWarning(t, name, ReasonInvalidChildName, func(ctx context.Context) ([]metav1.Condition, error) {
			g, err := e.grids.SuperedgeV1().ServiceGrids(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return g.Status.Conditions, nil
		}, "63")
	})
}
