package snapshottrust

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Age is the time of the snapshot answers come from while upstream has not
// confirmed it (see Stamp), zero while answers are live: what both
// components' snapshot_age_seconds reads.
type Age struct{ since atomic.Int64 }

// Serving records that answers come from a snapshot stamped at.
func (a *Age) Serving(at time.Time) { a.since.Store(at.UnixNano()) }

// Live records that answers are live again.
func (a *Age) Live() { a.since.Store(0) }

// Seconds is the age for the gauge: 0 while live, never negative (a stamp
// from a clock that was ahead).
func (a *Age) Seconds() float64 {
	since := a.since.Load()
	if since == 0 {
		return 0
	}
	return max(0, time.Since(time.Unix(0, since)).Seconds())
}

// AgeGaugeOpts names snapshot_age_seconds under a component's namespace
// and subsystem, with the one help text both components export.
func AgeGaugeOpts(namespace, subsystem string) prometheus.GaugeOpts {
	return prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "snapshot_age_seconds",
		Help: "While answers come from a snapshot upstream has not confirmed: seconds since its data was last known current, an upper bound of how old the answers are; 0 while answers are live.",
	}
}

// WritesCounterOpts names snapshot_writes_total{result}: written, unchanged
// (skipped) or failed (the component goes on answering from memory).
func WritesCounterOpts(namespace, subsystem string) prometheus.CounterOpts {
	return prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "snapshot_writes_total",
		Help: "Snapshot write attempts, by result: written, unchanged (skipped), failed (answers go on from memory).",
	}
}

// RefusedCounterOpts names snapshots_refused_total{reason}: one of the
// Refused* reasons.
func RefusedCounterOpts(namespace, subsystem string) prometheus.CounterOpts {
	return prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "snapshots_refused_total",
		Help: "Snapshots not served (or no longer served), by reason: identity (upstream's Node has another UID, or none: another cluster or a re-registered node), upstream-refuses (401, 403 or a certificate error: not an outage), too-old (written longer ago than the maximum age).",
	}
}
