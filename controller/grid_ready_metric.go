package controller

import "github.com/prometheus/client_golang/prometheus"

// gridReady mirrors each grid's Ready condition, so an alert sees from the
// cloud which grids are not serving every nodeunit.
var gridReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: metricsNamespace, Name: "grid_ready",
	Help: "1 while the grid's Ready condition is True, 0 while it is False, by kind, namespace and grid; a deleted grid's series goes.",
}, []string{"kind", "namespace", "grid"})

func recordGridReady(kind, namespace, name string, ready bool) {
	v := 0.0
	if ready {
		v = 1
	}
	gridReady.WithLabelValues(kind, namespace, name).Set(v)
}

func forgetGridReady(kind, namespace, name string) {
	gridReady.DeleteLabelValues(kind, namespace, name)
}
