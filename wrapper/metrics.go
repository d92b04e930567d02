package wrapper

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/servicegroup/servicegroup/internal/metricdef"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

const metricsNamespace = "application_grid_wrapper"

// Registry holds the wrapper's metrics, package watchcache's among them
// (requests, watches, served objects, the event log).
var Registry = prometheus.NewRegistry()

// Gatherer is what /metrics serves: Registry, and the workqueue_* metrics
// of the wrapper's sync queue (client-go's provider keeps those in a
// registry of its own).
var Gatherer prometheus.Gatherer = prometheus.Gatherers{Registry, metricdef.WorkqueueFamilies}

// metric declares the wrapper's metrics in Registry.
var metric = metricdef.With(Registry, metricsNamespace, "")

var (
	refilterSeconds = metric.Histogram("refilter_duration_seconds",
		"Time to recompute the served form of one Service with its Endpoints and EndpointSlices.",
		prometheus.ExponentialBuckets(1e-6, 4, 12))
	forgeableTopologyKeys = metric.Counter("forgeable_topology_keys_ignored_total",
		"Services (counted once per change of their keys) whose topologyKeys name labels a node can set on itself, ignored by --require-node-restricted-topology-keys.")
)

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	watchcache.RegisterMetrics(Registry)
}
