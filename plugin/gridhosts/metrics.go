package gridhosts

import (
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

// Counters bound once: the query path does no label lookups.
var (
	resultAnswer      = requestCount.WithLabelValues("answer")
	resultNoData      = requestCount.WithLabelValues("nodata")
	resultNXDomain    = requestCount.WithLabelValues("nxdomain")
	resultFallthrough = requestCount.WithLabelValues("fallthrough")
	resultNotSynced   = requestCount.WithLabelValues("not_synced")
	resultUnknown     = requestCount.WithLabelValues("unknown_client")
)
