package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/util/workqueue"
)

const metricsNamespace = "application_grid_controller"

var (
	reconcileTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "reconcile_total",
		Help: "Grid reconciles by kind and result (success, error).",
	}, []string{"kind", "result"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "reconcile_errors_total",
		Help: "Grid reconciles that failed and were requeued, by kind.",
	}, []string{"kind"})
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "reconcile_duration_seconds",
		Help:    "Time to reconcile one grid, by kind.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"kind"})
	childWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "child_applies_total",
		Help: "Server-side applies of children, by grid kind.",
	}, []string{"kind"})
	crdApplies = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "crd_applies_total",
		Help: "Times the embedded CRDs were applied (start-up and drift).",
	})
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
	wqDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "depth", Help: "Current depth of workqueue.",
	}, []string{"name"})
	wqAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "adds_total", Help: "Total number of adds handled by workqueue.",
	}, []string{"name"})
	wqLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help:    "How long in seconds an item stays in workqueue before being requested.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, []string{"name"})
	wqWorkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "work_duration_seconds",
		Help:    "How long in seconds processing an item from workqueue takes.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, []string{"name"})
	wqUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "unfinished_work_seconds",
		Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
	}, []string{"name"})
	wqLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "longest_running_processor_seconds",
		Help: "How many seconds has the longest running processor for workqueue been running.",
	}, []string{"name"})
	wqRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "retries_total", Help: "Total number of retries handled by workqueue.",
	}, []string{"name"})
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

var (
	registryOnce sync.Once
	registry     *prometheus.Registry
)

// Registry holds every metric the controller exports (plus Go and process
// collectors). Metrics are process-wide: controllers in one process share them.
func Registry() *prometheus.Registry {
	registryOnce.Do(func() {
		registry = prometheus.NewRegistry()
		registry.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			reconcileTotal, reconcileErrors, reconcileDuration, childWrites, crdApplies, gridReady, nodeunitReadyPods,
			wqDepth, wqAdds, wqLatency, wqWorkDuration, wqUnfinished, wqLongest, wqRetries,
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
