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

// TestStatefulSetSelectorChangeOnEachAPIServer changes a StatefulSetGrid's
// selector against each supported kube-apiserver release (the cached one and
// hack/apiserver-versions.txt). 1.36 and older refuse the change with a
// cause on "spec" that names no field: the controller must still report
// ImmutableField naming spec.selector and leave the StatefulSet in place,
// not delete it to re-create it (the new one could not adopt the pods).
func TestStatefulSetSelectorChangeOnEachAPIServer(t *testing.T) {
	// Parallel: it runs after the package's sequential tests, which gives
	// the older releases' build (in the background on a fresh machine,
	// hack/older-release-bins.sh) that much longer before it is waited for.
	t.Parallel()
	for _, r := range controlplane.APIServerReleasesForTest(t) {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel() // each its own control plane
			e := newEnv(t, controlplane.Options{APIServerBinary: r.Binary})
			ctx := t.Context()
			const ns = "default"
			e.node(t, "n1", map[string]string{"zone": "a"})
			e.startController(t, nil)
			e.createDBGrid(t, ns)
			var before *appsv1.StatefulSet
			testwait.Eventually(t.Context(), t, time.Minute, "db-a", func(ctx context.Context) error {
				sts, err := e.kube.AppsV1().StatefulSets(ns).Get(ctx, "db-a", metav1.GetOptions{})
				before = sts // err is the closure's own: the subtests run in parallel
				return err
			})
			if v, err := e.kube.Discovery().ServerVersion(); err != nil || v.GitVersion != r.Version {
				t.Fatalf("apiserver version %v (%v), want %s", v, err, r.Version)
			}
			err := retryOnConflict(ctx, func() error {
				g, err := e.grids.SuperedgeV1().StatefulSetGrids(ns).Get(ctx, "db", metav1.GetOptions{})
				if err != nil {
					return err
				}
				g.Spec.Template.Selector.MatchLabels["tier"] = "back"
				g.Spec.Template.Template.Labels["tier"] = "back"
				_, err = e.grids.SuperedgeV1().StatefulSetGrids(ns).Update(ctx, g, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			testwait.Eventually(t.Context(), t, time.Minute, "ImmutableField condition naming spec.selector", func(ctx context.Context) error {
				g, err := e.grids.SuperedgeV1().StatefulSetGrids(ns).Get(ctx, "db", metav1.GetOptions{})
				if err != nil {
					return err
				}
				c := meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionReconciled)
				if c == nil || c.Reason != ReasonImmutableField || !strings.Contains(c.Message, "spec.selector") || !strings.Contains(c.Message, "delete StatefulSet db-a") {
					return fmt.Errorf("condition %+v", c)
				}
				return nil
			})
			after, err := e.kube.AppsV1().StatefulSets(ns).Get(ctx, "db-a", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("StatefulSet db-a gone after a selector change: %v", err)
			}
			if after.UID != before.UID {
				t.Fatal("StatefulSet db-a re-created although its pods could not be adopted")
			}
			if evs, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=db,reason=" + ReasonRecreating}); err != nil || len(evs.Items) != 0 {
				t.Fatalf("Recreating events %v (%v)", evs, err)
			}
		})
	}
}
