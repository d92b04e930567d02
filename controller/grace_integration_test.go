package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestNodeUnitDeletionGrace: node labels stripped by a bad automation run,
// or a typo in gridUniqKey, only mark children for deletion (status and
// Event); put right within the grace period, no child and no pod was replaced.
func TestNodeUnitDeletionGrace(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{ControllerManager: true})
	ctx := t.Context()
	const ns = "default"
	e.node(t, "n1", map[string]string{"zone": "a"})
	e.node(t, "n2", map[string]string{"zone": "b"})
	e.startController(t, func(o *Options) { o.DeletionGracePeriod = time.Hour })
	if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(ctx, simpleDeploymentGrid(ns, "web", "zone", ptrInt32(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDeployments(t, ns, "web", "web-a", "web-b")
	snapshot := func(ctx context.Context) (map[string]types.UID, error) {
		out := map[string]types.UID{}
		ds, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, d := range ds.Items {
			out["deployment/"+d.Name] = d.UID
		}
		pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			out["pod/"+p.Name] = p.UID
		}
		return out, nil
	}
	var before map[string]types.UID
	testwait.Eventually(t.Context(), t, time.Minute, "one pod per nodeunit", func(ctx context.Context) error {
		s, err := snapshot(ctx)
		if err != nil {
			return err
		}
		pods := 0
		for k := range s {
			if strings.HasPrefix(k, "pod/") {
				pods++
			}
		}
		if pods != 2 {
			return fmt.Errorf("%d pods", pods)
		}
		before = s
		return nil
	})
	pendingFor := func(ctx context.Context, want ...string) error {
		g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, u := range g.Status.Units {
			if u.Pending != "" {
				got = append(got, u.Name)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("pending %v, want %v (units %+v)", got, want, g.Status.Units)
		}
		return nil
	}
	hasEvent := func(ctx context.Context, reason, text string) error {
		evs, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=" + reason})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, text) {
				return nil
			}
		}
		return fmt.Errorf("no %s Event mentioning %q", reason, text)
	}

	t.Run("labels stripped and restored", func(t *testing.T) {
		e.relabel(t, "n2", map[string]any{"zone": nil})
		testwait.Eventually(t.Context(), t, 20*time.Second, "deletion of web-b pending", func(ctx context.Context) error {
			if err := pendingFor(ctx, "b"); err != nil {
				return err
			}
			return hasEvent(ctx, ReasonDeletionPending, "web-b")
		})
		e.relabel(t, "n2", map[string]any{"zone": "b"})
		testwait.Eventually(t.Context(), t, 20*time.Second, "deletion of web-b cancelled", func(ctx context.Context) error {
			if err := pendingFor(ctx); err != nil {
				return err
			}
			return hasEvent(ctx, ReasonDeletionCancelled, "web-b")
		})
	})

	t.Run("typo in gridUniqKey and back", func(t *testing.T) {
		e.updateDeploymentGrid(t, ns, "web", func(g *superedgev1.DeploymentGrid) { g.Spec.GridUniqKey = "zoen" })
		testwait.Eventually(t.Context(), t, 20*time.Second, "every deletion pending", func(ctx context.Context) error { return pendingFor(ctx, "a", "b") })
		e.updateDeploymentGrid(t, ns, "web", func(g *superedgev1.DeploymentGrid) { g.Spec.GridUniqKey = "zone" })
		testwait.Eventually(t.Context(), t, 20*time.Second, "nothing pending", func(ctx context.Context) error { return pendingFor(ctx) })
	})

	after, err := snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		t.Errorf("children or pods replaced:\n%v\n->\n%v", before, after)
	}
}
