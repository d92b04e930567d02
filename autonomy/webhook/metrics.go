package webhook

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/autonomy/webhook/review"
	"github.com/servicegroup/servicegroup/internal/metricdef"
)

// metrics of the autonomy webhook (application_grid_controller_autonomy_*).
// Every replica computes the nodeunits' state from its own informers, so
// the gauges agree across replicas; the reviews counter is the replica's.
type metrics struct {
	reviews *prometheus.CounterVec
	state   *prometheus.GaugeVec
	since   *prometheus.GaugeVec
	until   *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := metricdef.With(reg, "application_grid_controller", "autonomy")
	out := &metrics{
		reviews: m.CounterVec("reviews_total",
			"Writes of the node lifecycle controller reviewed, by action (not-ready: a pod's Ready to False; taint: the unreachable NoExecute taint) and decision (withheld, allowed).",
			"action", "decision"),
		state: m.GaugeVec("nodeunit_state",
			"1 for each nodeunit of an autonomous grid with an unreachable node, by its state: Deciding, NodeFailure, CutOff (pods kept), Expired (past its autonomy).",
			"grid_key", "nodeunit", "state"),
		since: m.GaugeVec("nodeunit_unreachable_since_timestamp_seconds",
			"When the nodeunit's last node (CutOff, Expired) or first node (Deciding, NodeFailure) turned unreachable.",
			"grid_key", "nodeunit"),
		until: m.GaugeVec("nodeunit_autonomous_until_timestamp_seconds",
			"When a cut-off nodeunit's autonomy ends and Kubernetes' default handling applies.",
			"grid_key", "nodeunit"),
	}
	for _, a := range []review.Action{review.MarkNotReady, review.TaintNoExecute} {
		for _, d := range []string{"withheld", "allowed"} {
			out.reviews.WithLabelValues(string(a), d)
		}
	}
	return out
}

// setUnits replaces the nodeunit series with units.
func (m *metrics) setUnits(units []autonomy.UnitStatus) {
	m.state.Reset()
	m.since.Reset()
	m.until.Reset()
	for _, u := range units {
		m.state.WithLabelValues(u.Key, u.Value, string(u.State)).Set(1)
		m.since.WithLabelValues(u.Key, u.Value).Set(float64(u.Since.Unix()))
		if u.State == autonomy.CutOff || u.State == autonomy.Expired {
			m.until.WithLabelValues(u.Key, u.Value).Set(float64(u.Until.Unix()))
		}
	}
}
