package watchcache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegroup/servicegroup/internal/metricdef"
)

// The watch cache's metrics, declared here and registered by the process
// that serves them (RegisterMetrics), under the wrapper's names.
var metric = metricdef.With(nil, "application_grid_wrapper", "")

// Reasons for watchers_cut_off_total.
const (
	cutOffStalled = "stalled"
	cutOffBehind  = "behind"
)

var (
	requestsTotal = metric.CounterVec("requests_total",
		"HTTP requests by verb, resource (or \"proxy\") and status code.", "verb", "resource", "code")
	watchersGauge = metric.GaugeVec("watchers",
		"Open watches by resource.", "resource")
	watchersCutOff = metric.CounterVec("watchers_cut_off_total",
		"Watchers cut off by reason: \"stalled\" (a write did not complete within the write timeout) or \"behind\" (fell behind the event log; sent 410 Expired). The client resumes or relists.",
		"resource", "reason")
	eventsSent = metric.CounterVec("watch_events_sent_total",
		"Watch events written to clients by resource and type.", "resource", "type")
	servedObjects = metric.GaugeVec("served_objects",
		"Objects served by resource.", "resource")
	eventLogBytes = metric.GaugeVec("event_log_bytes",
		"Protobuf-encoded size of the events the event log holds, by resource (bounded by --event-log-bytes and, for live watchers, --watch-max-lag-bytes).",
		"resource")
)

// RegisterMetrics registers the watch cache's metrics in reg.
func RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(requestsTotal, watchersGauge, watchersCutOff, eventsSent, servedObjects, eventLogBytes)
}
