package wrapper

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const metricsNamespace = "application_grid_wrapper"

// Registry holds the wrapper's metrics; /metrics serves it.
var Registry = prometheus.NewRegistry()

// Reasons for watchers_cut_off_total.
const (
	cutOffStalled = "stalled"
	cutOffBehind  = "behind"
)

var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "requests_total",
		Help: "HTTP requests by verb, resource (or \"proxy\") and status code.",
	}, []string{"verb", "resource", "code"})
	watchersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "watchers",
		Help: "Open watches by resource.",
	}, []string{"resource"})
	watchersCutOff = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "watchers_cut_off_total",
		Help: "Watchers cut off by reason: \"stalled\" (a write did not complete within the write timeout) or \"behind\" (fell behind the event log; sent 410 Expired). The client resumes or relists.",
	}, []string{"resource", "reason"})
	eventsSent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "watch_events_sent_total",
		Help: "Watch events written to clients by resource and type.",
	}, []string{"resource", "type"})
	refilterSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "refilter_duration_seconds",
		Help:    "Time to recompute the served form of one Service with its Endpoints and EndpointSlices.",
		Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12),
	})
	servedObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "served_objects",
		Help: "Objects served by resource.",
	}, []string{"resource"})
	forgeableTopologyKeys = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "forgeable_topology_keys_ignored_total",
		Help: "Services (counted once per change of their keys) whose topologyKeys name labels a node can set on itself, ignored by --require-node-restricted-topology-keys.",
	})
	eventLogBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "event_log_bytes",
		Help: "Protobuf-encoded size of the events the event log holds, by resource (bounded by --event-log-bytes and, for live watchers, --watch-max-lag-bytes).",
	}, []string{"resource"})
)

func init() {
	Registry.MustRegister(requestsTotal, watchersGauge, watchersCutOff, eventsSent, refilterSeconds, servedObjects, eventLogBytes, forgeableTopologyKeys,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}
