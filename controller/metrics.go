package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/servicegroup/servicegroup/internal/metricdef"
)

const metricsNamespace = "application_grid_controller"

// registry holds the controller's metrics, each registered as it is declared;
// Registry adds the Go and process collectors on first use.
var registry = prometheus.NewRegistry()

var (
	metric = metricdef.With(registry, metricsNamespace, "")

	reconcileTotal = metric.CounterVec("reconcile_total",
		"Grid reconciles by kind and result (success, error).", "kind", "result")
	reconcileErrors = metric.CounterVec("reconcile_errors_total",
		"Grid reconciles that failed and were requeued, by kind.", "kind")
	reconcileDuration = metric.HistogramVec("reconcile_duration_seconds",
		"Time to reconcile one grid, by kind.", prometheus.ExponentialBuckets(0.001, 2, 15), "kind")
	childWrites = metric.CounterVec("child_applies_total",
		"Server-side applies of children, by grid kind.", "kind")
	crdApplies = metric.Counter("crd_applies_total",
		"Times the embedded CRDs were applied (start-up and drift).")
)

func observeReconcile(kind string, took time.Duration, err error) {
	reconcileDuration.WithLabelValues(kind).Observe(took.Seconds())
	if err != nil {
		reconcileTotal.WithLabelValues(kind, "error").Inc()
		reconcileErrors.WithLabelValues(kind).Inc()
		return
	}
	reconcileTotal.WithLabelValues(kind, "success").Inc()
}

func countChildWrite(kind string) { childWrites.WithLabelValues(kind).Inc() }

var registryOnce sync.Once

// Registry gathers every metric the controller exports (plus Go and process
// collectors). Metrics are process-wide: controllers in one process share them.
func Registry() prometheus.Gatherer {
	registryOnce.Do(func() {
		registry.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
		// Every kind's error series exists from the start at 0, so an alert's
		// increase() sees the first error too.
		for _, kind := range []string{"DeploymentGrid", "StatefulSetGrid", "ServiceGrid"} {
			reconcileErrors.WithLabelValues(kind)
			reconcileTotal.WithLabelValues(kind, "error")
		}
	})
	return prometheus.Gatherers{registry, metricdef.WorkqueueFamilies}
}
