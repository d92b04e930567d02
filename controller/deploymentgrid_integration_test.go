package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestDeploymentGridFollowsNodeUnits walks one DeploymentGrid through every
// lifecycle step on a real apiserver: children per nodeunit with labels,
// owner and merged nodeSelector; a new nodeunit; a template change; a child
// deleted by hand; adoption of a matching orphan; release of a child whose
// label stops matching; a foreign object in the way; a vanished nodeunit.
func TestDeploymentGridFollowsNodeUnits(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	const ns, grid, key = "lifecycle", "web", "site"
	e.namespace(t, ns)
	e.node(t, "a1", map[string]string{key: "east"})
	e.node(t, "a2", map[string]string{key: "east"})
	e.node(t, "b1", map[string]string{key: "west"})
	e.node(t, "c1", map[string]string{"other": "x"})
	e.startController(t, nil)

	dg, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(ctx, simpleDeploymentGrid(ns, grid, key, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.waitDeployments(t, ns, grid, "web-east", "web-west")

	d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-east", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkChild(t, d, dg.UID, key, "east")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas omitted in the template: want the default 1, got %v", d.Spec.Replicas)
	}

	t.Run("new nodeunit gets a child", func(t *testing.T) {
		e.node(t, "n1", map[string]string{key: "north"})
		e.waitDeployments(t, ns, grid, "web-east", "web-west", "web-north")
	})

	t.Run("template change updates every child", func(t *testing.T) {
		e.updateDeploymentGrid(t, ns, grid, func(g *superedgev1.DeploymentGrid) {
			g.Spec.Template.Template.Spec.Containers[0].Image = "registry.example/echo:2"
			g.Spec.Template.Replicas = ptr.To[int32](3)
		})
		testwait.Eventually(t.Context(), t, 20*time.Second, "every child runs echo:2 with 3 replicas", func(ctx context.Context) error {
			for _, v := range []string{"east", "west", "north"} {
				d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-"+v, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example/echo:2" || *d.Spec.Replicas != 3 {
					return fmt.Errorf("%s: image %s replicas %d", d.Name, img, *d.Spec.Replicas)
				}
			}
			return nil
		})
	})

	t.Run("child deleted by hand is recreated", func(t *testing.T) {
		old, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-west", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.kube.AppsV1().Deployments(ns).Delete(ctx, "web-west", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testwait.Eventually(t.Context(), t, 20*time.Second, "web-west recreated", func(ctx context.Context) error {
			d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-west", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.UID == old.UID {
				return fmt.Errorf("still the old object")
			}
			return nil
		})
	})

	t.Run("matching orphan is adopted", func(t *testing.T) {
		orphan := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-south", Labels: map[string]string{
				superedgev1.LabelGridSelector: grid, superedgev1.LabelGridUniqKey: key}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": grid}},
				Template: podTemplate(grid, "registry.example/old:0"),
			},
		}
		// Same container name as the grid's: server-side apply takes over the
		// fields we set and leaves fields only others set alone.
		orphan.Spec.Template.Spec.Containers[0].Name = "echo"
		created, err := e.kube.AppsV1().Deployments(ns).Create(ctx, orphan, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.node(t, "s1", map[string]string{key: "south"})
		testwait.Eventually(t.Context(), t, 20*time.Second, "web-south adopted and updated", func(ctx context.Context) error {
			d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-south", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.UID != created.UID {
				return fmt.Errorf("replaced instead of adopted")
			}
			if !metav1.IsControlledBy(d, dg) {
				return fmt.Errorf("not controlled by the grid: %v", d.OwnerReferences)
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example/echo:2" {
				return fmt.Errorf("image %s", img)
			}
			return nil
		})
	})

	t.Run("child whose label stops matching is released", func(t *testing.T) {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"someone-else"}}}`, superedgev1.LabelGridSelector)
		before, err := e.kube.AppsV1().Deployments(ns).Patch(ctx, "web-north", types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		testwait.Eventually(t.Context(), t, 20*time.Second, "web-north released, kept, and reported as a conflict", func(ctx context.Context) error {
			d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-north", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.UID != before.UID {
				return fmt.Errorf("replaced")
			}
			if len(d.OwnerReferences) != 0 {
				return fmt.Errorf("still owned: %v", d.OwnerReferences)
			}
			if d.Labels[superedgev1.LabelGridSelector] != "someone-else" {
				return fmt.Errorf("label overwritten: %v", d.Labels)
			}
			g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, grid, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionReconciled)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonNameConflict {
				return fmt.Errorf("condition %+v", c)
			}
			if c := meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionConflict); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "web-") {
				return fmt.Errorf("Conflict condition %+v", c)
			}
			return nil
		})
	})

	t.Run("object controlled by someone else is never touched", func(t *testing.T) {
		cm, err := e.kube.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "owner"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		foreign := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-central",
				Labels:          map[string]string{superedgev1.LabelGridSelector: grid, superedgev1.LabelGridUniqKey: key},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foreign"}},
				Template: podTemplate("foreign", "registry.example/foreign:1"),
			},
		}
		created, err := e.kube.AppsV1().Deployments(ns).Create(ctx, foreign, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.node(t, "m1", map[string]string{key: "central"})
		testwait.Eventually(t.Context(), t, 20*time.Second, "Warning NameConflict naming web-central", func(ctx context.Context) error {
			evs, err := e.warningEvents(ctx, ns, grid, ReasonNameConflict)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if strings.Contains(ev.Message, "web-central") {
					return nil
				}
			}
			return fmt.Errorf("events %v", evs)
		})
		d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-central", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.ResourceVersion != created.ResourceVersion {
			t.Errorf("foreign Deployment was written to: rv %s -> %s", created.ResourceVersion, d.ResourceVersion)
		}
	})

	t.Run("vanished nodeunit loses its child", func(t *testing.T) {
		e.relabel(t, "b1", map[string]any{key: nil})
		testwait.Eventually(t.Context(), t, 20*time.Second, "web-west deleted", func(ctx context.Context) error {
			_, err := e.kube.AppsV1().Deployments(ns).Get(ctx, "web-west", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
		// The released and the foreign objects stay.
		for _, name := range []string{"web-north", "web-central", "web-east", "web-south"} {
			if _, err := e.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("status mirrors children", func(t *testing.T) {
		testwait.Eventually(t.Context(), t, 20*time.Second, "status lists east and south", func(ctx context.Context) error {
			g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, grid, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if g.Status.ObservedGeneration != g.Generation {
				return fmt.Errorf("observedGeneration %d, generation %d", g.Status.ObservedGeneration, g.Generation)
			}
			if _, ok := g.Status.States["east"]; !ok || g.Status.NodeUnits != 2 {
				return fmt.Errorf("states %v nodeUnits %d", g.Status.States, g.Status.NodeUnits)
			}
			if _, ok := g.Status.States["south"]; !ok {
				return fmt.Errorf("states %v", g.Status.States)
			}
			return nil
		})
	})
}

// checkChild asserts the labels, owner and nodeSelector of a workload child.
func checkChild(t *testing.T, d *appsv1.Deployment, owner types.UID, key, value string) {
	t.Helper()
	if d.Labels[superedgev1.LabelGridSelector] != "web" || d.Labels[superedgev1.LabelGridUniqKey] != superedgev1.GridUniqKeyLabelValue(key) ||
		d.Labels["team"] != "edge" || d.Annotations[superedgev1.AnnotationGridUniqKey] != key {
		t.Errorf("labels %v", d.Labels)
	}
	ref := metav1.GetControllerOf(d)
	if ref == nil || ref.UID != owner || ref.Kind != "DeploymentGrid" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("controller reference %+v", ref)
	}
	ns := d.Spec.Template.Spec.NodeSelector
	if ns[key] != value || ns["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v", ns)
	}
	if pl := d.Spec.Template.Labels; len(pl) != 1 || pl["app"] != "web" {
		t.Errorf("pod template labels must be the template's only: %v", pl)
	}
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) != 1 || d.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("selector must stay the template's: %v", d.Spec.Selector)
	}
}
