package wrapper

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/servicegroup/servicegroup/internal/metricdef"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

const metricsNamespace = "application_grid_wrapper"

// Registry holds the wrapper's metrics.
var Registry = prometheus.NewRegistry()

// Gatherer is what /metrics serves: Registry, and the workqueue_* metrics
// of the wrapper's sync queue (client-go's provider keeps those in a
// registry of its own).
var Gatherer prometheus.Gatherer = prometheus.Gatherers{Registry, metricdef.WorkqueueFamilies}

// Reasons for watchers_cut_off_total.
const (
	cutOffStalled = "stalled"
	cutOffBehind  = "behind"
)

// metric declares the wrapper's metrics in Registry.
var metric = metricdef.With(Registry, metricsNamespace, "")

var (
	requestsTotal = metric.CounterVec("requests_total",
		"HTTP requests by verb, resource (or \"proxy\") and status code.", "verb", "resource", "code")
	watchersCutOff = metric.CounterVec("watchers_cut_off_total",
		"Watchers cut off by reason: \"stalled\" (a write did not complete within the write timeout) or \"behind\" (fell behind the event log; sent 410 Expired). The client resumes or relists.",
		"resource", "reason")
	eventsSent = metric.CounterVec("watch_events_sent_total",
		"Watch events written to clients by resource and type.", "resource", "type")
	refilterSeconds = metric.Histogram("refilter_duration_seconds",
		"Time to recompute the served form of one Service with its Endpoints and EndpointSlices.",
		prometheus.ExponentialBuckets(1e-6, 4, 12))
	servedObjects = metric.GaugeVec("served_objects",
		"Objects served by resource.", "resource")
	forgeableTopologyKeys = metric.Counter("forgeable_topology_keys_ignored_total",
		"Services (counted once per change of their keys) whose topologyKeys name labels a node can set on itself, ignored by --require-node-restricted-topology-keys.")
	eventLogBytes = metric.GaugeVec("event_log_bytes",
		"Protobuf-encoded size of the events the event log holds, by resource (bounded by --event-log-bytes and, for live watchers, --watch-max-lag-bytes).",
		"resource")
)

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	watchcache.RegisterMetrics(Registry)
}
