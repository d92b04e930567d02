package snapshot

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
)

// The snapshot's metrics, gridhosts' (coredns_gridhosts_snapshot_*) and
// named as the wrapper's (package snapshottrust). servingWritten is the
// time of the snapshot being answered from.
var (
	servingWritten snapshottrust.Age

	// Serving is 1 while answers come from a snapshot: the plugin sets it
	// where it switches between a snapshot and live answers.
	Serving = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gridhosts",
		Name:      "snapshot_serving",
		Help:      "1 while grid names are answered from the on-disk snapshot because the informers are not synced, else 0.",
	})

	_ = promauto.NewGaugeFunc(snapshottrust.AgeGaugeOpts(plugin.Namespace, "gridhosts"), servingWritten.Seconds)

	refused = promauto.NewCounterVec(snapshottrust.RefusedCounterOpts(plugin.Namespace, "gridhosts"), []string{"reason"})

	writes    = promauto.NewCounterVec(snapshottrust.WritesCounterOpts(plugin.Namespace, "gridhosts"), []string{"result"})
	wroteNew  = writes.WithLabelValues("written")
	wroteNone = writes.WithLabelValues("unchanged")
	writeFail = writes.WithLabelValues("failed")
)
