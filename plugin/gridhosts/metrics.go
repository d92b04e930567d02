package gridhosts

import (
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	requestCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gridhosts",
		Name:      "requests_total",
		Help:      "Queries inside the gridhosts zones, by result.",
	}, []string{"result"})

	forgeableKeysIgnored = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gridhosts",
		Name:      "forgeable_keys_ignored_total",
		Help:      "Services and grids (once per change of their keys) whose keys a node can set on itself, ignored by require_node_restricted_keys.",
	})

	recordsServed = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gridhosts",
		Name:      "records_served_total",
		Help:      "Resource records gridhosts put in answer sections.",
	})

	eventToAnswerable = promauto.NewHistogram(prometheus.HistogramOpts{
		Namespace:                   plugin.Namespace,
		Subsystem:                   "gridhosts",
		Name:                        "event_to_answerable_seconds",
		Help:                        "Time from an informer delivering an object to its change being answerable.",
		Buckets:                     prometheus.ExponentialBuckets(1e-6, 4, 12),
		NativeHistogramBucketFactor: plugin.NativeHistogramBucketFactor,
	})

	// The apiserver records writes in managedFields with one-second grain,
	// so this is an upper bound, late by up to a second.
	writeToAnswerable = promauto.NewHistogram(prometheus.HistogramOpts{
		Namespace:                   plugin.Namespace,
		Subsystem:                   "gridhosts",
		Name:                        "write_to_answerable_seconds",
		Help:                        "Time from the apiserver's write of a watched change (managedFields time, one-second grain) to the change being answerable.",
		Buckets:                     []float64{1, 2, 3, 5, 10, 30, 60, 300},
		NativeHistogramBucketFactor: plugin.NativeHistogramBucketFactor,
	})
)

// Snapshot metrics. servingSnapshotWritten is the write time (Unix
// nanoseconds) of the snapshot being answered from, 0 while answers are
// live.
var (
	servingSnapshotWritten atomic.Int64

	snapshotServing = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gridhosts",
		Name:      "snapshot_serving",
		Help:      "1 while grid names are answered from the on-disk snapshot because the informers are not synced, else 0.",
	})

	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gridhosts",
		Name:      "snapshot_age_seconds",
		Help:      "While answers come from a snapshot upstream has not confirmed: seconds since its data was last known current, an upper bound of how old the answers are; 0 while answers are live.",
	}, func() float64 {
		w := servingSnapshotWritten.Load()
		if w == 0 {
			return 0
		}
		return time.Since(time.Unix(0, w)).Seconds()
	})

	snapshotWrites = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gridhosts",
		Name:      "snapshot_writes_total",
		Help:      "Snapshot write attempts, by result: written, unchanged (skipped), failed.",
	}, []string{"result"})
)

// Counters bound once: the query path does no label lookups.
var (
	resultAnswer      = requestCount.WithLabelValues("answer")
	resultNoData      = requestCount.WithLabelValues("nodata")
	resultNXDomain    = requestCount.WithLabelValues("nxdomain")
	resultFallthrough = requestCount.WithLabelValues("fallthrough")
	resultNotSynced   = requestCount.WithLabelValues("not_synced")
	resultUnknown     = requestCount.WithLabelValues("unknown_client")

	snapshotWritten   = snapshotWrites.WithLabelValues("written")
	snapshotUnchanged = snapshotWrites.WithLabelValues("unchanged")
	snapshotFailed    = snapshotWrites.WithLabelValues("failed")
)
