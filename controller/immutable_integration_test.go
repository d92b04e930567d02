package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestImmutableFieldsNeverWedge: a StatefulSetGrid change the apiserver
// refuses in place (podManagementPolicy) re-creates the StatefulSet with its
// pod kept and re-adopted; a Deployment selector change, which could not
// keep the pods, is reported by a condition naming the field and the way out.
func TestImmutableFieldsNeverWedge(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{ControllerManager: true})
	ctx := t.Context()
	const ns = "default"
	e.node(t, "n1", map[string]string{"zone": "a"})
	e.startController(t, nil)
	e.createDBGrid(t, ns)
	var oldSet *appsv1.StatefulSet
	var podUID string
	testwait.Eventually(t.Context(), t, time.Minute, "db-a and its pod", func(ctx context.Context) error {
		s, err := e.kube.AppsV1().StatefulSets(ns).Get(ctx, "db-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p, err := e.kube.CoreV1().Pods(ns).Get(ctx, "db-a-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		oldSet, podUID = s, string(p.UID)
		return nil
	})

	t.Run("StatefulSet re-created, pod kept", func(t *testing.T) {
		err := retryOnConflict(ctx, func() error {
			g, err := e.grids.SuperedgeV1().StatefulSetGrids(ns).Get(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return err
			}
			g.Spec.Template.PodManagementPolicy = appsv1.ParallelPodManagement
			_, err = e.grids.SuperedgeV1().StatefulSetGrids(ns).Update(ctx, g, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		testwait.Eventually(t.Context(), t, time.Minute, "new db-a adopted the old pod", func(ctx context.Context) error {
			s, err := e.kube.AppsV1().StatefulSets(ns).Get(ctx, "db-a", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.UID == oldSet.UID || s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				return fmt.Errorf("not re-created: uid %s policy %s", s.UID, s.Spec.PodManagementPolicy)
			}
			p, err := e.kube.CoreV1().Pods(ns).Get(ctx, "db-a-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !metav1.IsControlledBy(p, s) {
				return fmt.Errorf("pod owners %v", p.OwnerReferences)
			}
			if string(p.UID) != podUID {
				return fmt.Errorf("pod replaced: %s -> %s", podUID, p.UID)
			}
			return nil
		})
	})

	t.Run("selector change: condition naming the field", func(t *testing.T) {
		if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(ctx, simpleDeploymentGrid(ns, "web", "zone", ptrInt32(1)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitDeployments(t, ns, "web", "web-a")
		before, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.updateDeploymentGrid(t, ns, "web", func(g *superedgev1.DeploymentGrid) {
			g.Spec.Template.Selector.MatchLabels["tier"] = "front"
			g.Spec.Template.Template.Labels["tier"] = "front"
		})
		testwait.Eventually(t.Context(), t, 30*time.Second, "ImmutableField condition naming spec.selector", func(ctx context.Context) error {
			g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionReconciled)
			if c == nil || c.Reason != ReasonImmutableField || !strings.Contains(c.Message, "spec.selector") || !strings.Contains(c.Message, "delete Deployment web-a") {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		after, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.UID != before.UID {
			t.Errorf("Deployment replaced although its pods could not be kept")
		}
	})
}

func retryOnConflict(ctx context.Context, f func() error) error {
	for range 20 {
		err := f()
		if err == nil || !strings.Contains(err.Error(), "the object has been modified") {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("still conflicting")
}

// createDBGrid creates StatefulSetGrid db in ns: keyed on zone, one
// replica of registry.example/db:1 selected by app=db.
func (e *env) createDBGrid(t *testing.T, ns string) {
	t.Helper()
	ssg := &superedgev1.StatefulSetGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: superedgev1.StatefulSetGridSpec{GridUniqKey: "zone", Template: appsv1.StatefulSetSpec{
			Replicas: ptrInt32(1), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: podTemplate("db", "registry.example/db:1"),
		}},
	}
	if _, err := e.grids.SuperedgeV1().StatefulSetGrids(ns).Create(t.Context(), ssg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
