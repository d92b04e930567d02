package controller

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestSummariesCarryServiceGridKeys: a key that only a Service names as its
// grid key (gridhosts keeps a headless one in its nodeunit by it) is
// summarised, and leaves the summaries when the Service drops it.
func TestSummariesCarryServiceGridKeys(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	e.node(t, "node0", map[string]string{"rack": "r1", "other": "x"})
	e.node(t, "node1", map[string]string{"rack": "r2"})
	e.startController(t, nil)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hl", Labels: map[string]string{superedgev1.LabelGridUniqKey: "rack"}},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := e.kube.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	summarisedAs := func(want map[string]map[string]string) func(context.Context) error {
		return func(ctx context.Context) error {
			l, err := e.grids.SuperedgeV1().NodeLabelSummaries().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			got := map[string]map[string]string{}
			for _, s := range l.Items {
				for _, n := range s.Nodes {
					got[n.Name] = n.Labels
				}
			}
			if !maps.EqualFunc(got, want, func(a, b map[string]string) bool { return maps.Equal(a, b) }) {
				return fmt.Errorf("summarised %v, want %v", got, want)
			}
			return nil
		}
	}
	testwait.Eventually(t.Context(), t, 2*time.Minute, "the Service's grid key summarised", summarisedAs(map[string]map[string]string{
		"node0": {"rack": "r1"}, "node1": {"rack": "r2"},
	}))
	svc, err := e.kube.CoreV1().Services("default").Get(t.Context(), "hl", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Labels = nil
	if _, err := e.kube.CoreV1().Services("default").Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t.Context(), t, 2*time.Minute, "the key dropped", summarisedAs(map[string]map[string]string{"node0": nil, "node1": nil}))
}
