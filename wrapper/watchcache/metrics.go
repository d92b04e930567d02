package watchcache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegroup/servicegroup/internal/metricdef"
)

// The watch cache's metrics, declared here and registered by the process
// that serves them (RegisterMetrics), under the wrapper's names.
var metric = metricdef.With(nil, "application_grid_wrapper", "")

var (
	watchersGauge = metric.GaugeVec("watchers",
		"Open watches by resource.", "resource")
)

// RegisterMetrics registers the watch cache's metrics in reg.
func RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(watchersGauge)
}
