package wrapper

import "sync/atomic"

// runningServer is the Server whose Run is in progress (one per process
// outside tests): its readiness is what application_grid_wrapper_ready says.
var runningServer atomic.Pointer[Server]

// readyGauge answers what /readyz answers, for alerts and dashboards that
// see every node's wrapper from the cloud.
var readyGauge = metric.GaugeFunc("ready",
	"1 while /readyz answers ok (caches synced or a trusted snapshot served, and the serving port held), else 0.",
	runningServerReady)

func runningServerReady() float64 {
	if s := runningServer.Load(); s != nil && s.ready.Load() {
		if taken, _ := s.portTaken.Load().(string); taken == "" {
			return 1
		}
	}
	return 0
}
