package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/util/workqueue"

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

// Workqueue metrics, named as client-go's own provider in component-base
// names them, labelled by queue name.
var (
	workqueueMetric = metricdef.With(registry, "", "workqueue")
	// Seconds from 10ns up, by powers of 10.
	workqueueBuckets = prometheus.ExponentialBuckets(10e-9, 10, 12)

	wqDepth = workqueueMetric.GaugeVec("depth",
		"Current depth of workqueue.", "name")
	wqAdds = workqueueMetric.CounterVec("adds_total",
		"Total number of adds handled by workqueue.", "name")
	wqLatency = workqueueMetric.HistogramVec("queue_duration_seconds",
		"How long in seconds an item stays in workqueue before being requested.", workqueueBuckets, "name")
	wqWorkDuration = workqueueMetric.HistogramVec("work_duration_seconds",
		"How long in seconds processing an item from workqueue takes.", workqueueBuckets, "name")
	wqUnfinished = workqueueMetric.GaugeVec("unfinished_work_seconds",
		"How many seconds of work has been done that is in progress and hasn't been observed by work_duration.", "name")
	wqLongest = workqueueMetric.GaugeVec("longest_running_processor_seconds",
		"How many seconds has the longest running processor for workqueue been running.", "name")
	wqRetries = workqueueMetric.CounterVec("retries_total",
		"Total number of retries handled by workqueue.", "name")
)

// QueueMetrics implements workqueue.MetricsProvider on the Registry.
type QueueMetrics struct{}

var _ workqueue.MetricsProvider = QueueMetrics{}

func (QueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return wqDepth.WithLabelValues(name)
}
func (QueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return wqAdds.WithLabelValues(name)
}
func (QueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return wqLatency.WithLabelValues(name)
}
func (QueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return wqWorkDuration.WithLabelValues(name)
}
func (QueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return wqUnfinished.WithLabelValues(name)
}
func (QueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return wqLongest.WithLabelValues(name)
}
func (QueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return wqRetries.WithLabelValues(name)
}

var registryOnce sync.Once

// Registry holds every metric the controller exports (plus Go and process
// collectors). Metrics are process-wide: controllers in one process share them.
func Registry() *prometheus.Registry {
	registryOnce.Do(func() {
		registry.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
		// Queues built elsewhere in the process (none today) report here too.
		workqueue.SetProvider(QueueMetrics{})
		// Every kind's error series exists from the start at 0, so an alert's
		// increase() sees the first error too.
		for _, kind := range []string{"DeploymentGrid", "StatefulSetGrid", "ServiceGrid"} {
			reconcileErrors.WithLabelValues(kind)
			reconcileTotal.WithLabelValues(kind, "error")
		}
	})
	return registry
}
