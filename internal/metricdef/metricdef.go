// Package metricdef declares a component's Prometheus metrics one line
// each. A Factory holds what every metric of a component shares (the
// registry it is registered in, its namespace and subsystem), so a
// declaration states only what is its own: name, help, labels and, for
// histograms, buckets. The controller and the wrapper declare theirs with
// it; gridhosts keeps CoreDNS's plugin idiom (promauto on the default
// registry, plugin.Namespace).
package metricdef

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Factory makes metrics under one namespace and subsystem and registers
// each in its registry as it is made. Its promauto.Factory takes complete
// options, for metrics whose options another package states
// (snapshottrust's snapshot metrics).
type Factory struct {
	promauto.Factory
	namespace, subsystem string
}

// With returns the Factory for metrics named namespace_subsystem_name
// ("" leaves a part out) registered in reg.
func With(reg prometheus.Registerer, namespace, subsystem string) Factory {
	return Factory{Factory: promauto.With(reg), namespace: namespace, subsystem: subsystem}
}

func (f Factory) opts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: f.namespace, Subsystem: f.subsystem, Name: name, Help: help}
}

// Counter makes and registers a counter.
func (f Factory) Counter(name, help string) prometheus.Counter {
	return f.NewCounter(prometheus.CounterOpts(f.opts(name, help)))
}

// CounterVec makes and registers a counter with labels.
func (f Factory) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return f.NewCounterVec(prometheus.CounterOpts(f.opts(name, help)), labels)
}

// Gauge makes and registers a gauge.
func (f Factory) Gauge(name, help string) prometheus.Gauge {
	return f.NewGauge(prometheus.GaugeOpts(f.opts(name, help)))
}

// GaugeVec makes and registers a gauge with labels.
func (f Factory) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return f.NewGaugeVec(prometheus.GaugeOpts(f.opts(name, help)), labels)
}

// GaugeFunc makes and registers a gauge whose value is value() at each
// scrape.
func (f Factory) GaugeFunc(name, help string, value func() float64) prometheus.GaugeFunc {
	return f.NewGaugeFunc(prometheus.GaugeOpts(f.opts(name, help)), value)
}

// Histogram makes and registers a histogram with these bucket bounds.
func (f Factory) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return f.NewHistogram(f.histogramOpts(name, help, buckets))
}

// HistogramVec makes and registers a histogram with labels and these
// bucket bounds.
func (f Factory) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return f.NewHistogramVec(f.histogramOpts(name, help, buckets), labels)
}

func (f Factory) histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: f.namespace, Subsystem: f.subsystem, Name: name, Help: help, Buckets: buckets}
}
