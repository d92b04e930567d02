package wrapper

// readyGauge says what /readyz says, for alerts and dashboards that see
// every node's wrapper from the cloud: the Server's readiness sets it on
// every change (one Server per process outside tests).
var readyGauge = metric.Gauge("ready",
	"1 while /readyz answers ok (caches synced or a trusted snapshot served, and the serving port held), else 0.")

func setReadyGauge(ready bool) {
	if ready {
		readyGauge.Set(1)
		return
	}
	readyGauge.Set(0)
}
