package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// BenchmarkConverge: 100 DeploymentGrids x 50 nodeunits (5,000 Deployments)
// from empty to converged on a real apiserver. Reports wall time, the
// controller's write requests (all, children only), writes per child, and
// the writes a forced resync of the converged world makes (goal: 0).
// Run with -benchtime=1x: one iteration takes tens of seconds.
func BenchmarkConverge(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/controller-converge.md")
	const grids, units = 100, 50
	e := newEnv(b, controlplane.Options{})
	for i := range units {
		e.node(b, fmt.Sprintf("node-%02d", i), map[string]string{"zone": fmt.Sprintf("u%02d", i)})
	}
	_, wc, stop := e.startController(b, func(o *Options) { o.Workers = 8; o.Resync = 0 })

	b.StopTimer()
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		ns := fmt.Sprintf("bench-%d", iter)
		e.namespace(b, ns)
		// Let the controller's informers see the namespace's absence of grids.
		quietB(b, wc)
		wc.reset()
		start := time.Now()
		b.StartTimer()
		for g := range grids {
			dg := simpleDeploymentGrid(ns, fmt.Sprintf("grid-%03d", g), "zone", nil)
			if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(b.Context(), dg, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		testwait.Eventually(b.Context(), b, 10*time.Minute, "every grid converged", func(ctx context.Context) error {
			list, err := e.grids.SuperedgeV1().DeploymentGrids(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			done := 0
			for _, g := range list.Items {
				if g.Status.NodeUnits == units && g.Status.ObservedGeneration == g.Generation {
					done++
				}
			}
			if done != grids {
				return fmt.Errorf("%d/%d converged", done, grids)
			}
			return nil
		})
		b.StopTimer()
		wall := time.Since(start)
		quietB(b, wc)
		all := wc.list(nil)
		// Creates are POSTs to the collection, applies PATCHes of one Deployment.
		children := wc.list(func(s string) bool {
			return strings.HasSuffix(s, "/deployments") || strings.Contains(s, "/deployments/")
		})
		deps, err := e.kube.AppsV1().Deployments(ns).List(b.Context(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(deps.Items) != grids*units {
			b.Fatalf("%d Deployments, want %d", len(deps.Items), grids*units)
		}
		benchRec.Report(wall.Seconds(), "s/converge")
		benchRec.Report(float64(len(all)), "writes")
		benchRec.Report(float64(len(children)), "child-writes")
		benchRec.Report(float64(len(children))/float64(grids*units), "child-writes/child")
		benchRec.Report(float64(len(all))/float64(grids*units), "writes/child")
		benchRec.Report(float64(len(wc.list(func(s string) bool { return strings.HasSuffix(s, "/status") }))), "status-writes")
		benchRec.Report(float64(len(wc.list(func(s string) bool { return strings.Contains(s, "/events") }))), "event-writes")
	}

	// Forced resync: a fresh controller (cold caches, every grid
	// reconciled once) against the converged world.
	stop()
	before := counter(reconcileTotal.WithLabelValues("DeploymentGrid", "success"))
	_, wc2, _ := e.startController(b, func(o *Options) { o.Workers = 8; o.Resync = 0 })
	testwait.Eventually(b.Context(), b, 5*time.Minute, "every grid re-reconciled", func(context.Context) error {
		if n := counter(reconcileTotal.WithLabelValues("DeploymentGrid", "success")) - before; n < grids*float64(b.N) {
			return fmt.Errorf("%v reconciles", n)
		}
		return nil
	})
	quietB(b, wc2)
	benchRec.Report(float64(len(wc2.list(nil))), "resync-writes")
}

// quietB waits for the controller's writes to stop for two seconds.
func quietB(b *testing.B, wc *writeCounter) { quiet(b, wc, 2*time.Second, 5*time.Minute) }

// counter reads a Prometheus counter.
func counter(c interface{ Write(*dto.Metric) error }) float64 {
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
