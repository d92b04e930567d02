package wrapper

import (
	"errors"
	"net/netip"
	"time"

	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/wrapper/sitestream"
)

// Options configure a wrapper Server.
type Options struct {
	// NodeName is the node this wrapper serves (required).
	NodeName string
	// Upstream is the (lite-)apiserver the wrapper reads from and proxies to.
	Upstream *rest.Config
	// BookmarkInterval between BOOKMARKs to watchers that allow them
	// (default DefaultBookmarkInterval).
	BookmarkInterval time.Duration
	// EventLogBytes is the encoded size of the newest events per resource a
	// watch can resume from (default DefaultEventLogBytes).
	EventLogBytes int64
	// WatchMaxLagBytes is how far (encoded bytes of events) a live watcher
	// may fall behind before it gets 410 Expired and relists (default
	// DefaultWatchMaxLagBytes). Only a burst larger than this outruns a
	// watcher that reads at full speed.
	WatchMaxLagBytes int64
	// WatchWriteTimeout is how long a watch may wait for its client to take
	// a batch of events before it is cut off (default
	// DefaultWatchWriteTimeout).
	WatchWriteTimeout time.Duration
	// Debug serves pprof under /debug/pprof/.
	Debug bool
	// StartVersion is the first resourceVersion (default: now in nanoseconds,
	// so versions increase across restarts).
	StartVersion uint64
	// StateDir keeps the snapshot of what is served, so a restart while
	// upstream is away serves it at once; "" keeps nothing on disk.
	StateDir string
	// RequireNodeRestrictedTopologyKeys treats topology keys a node's
	// kubelet can set on its own Node (any key not under
	// node-restriction.kubernetes.io/) as never matching.
	RequireNodeRestrictedTopologyKeys bool
	// OnDemandIdleTimeout is how long v1 Endpoints, and the Services and
	// EndpointSlices kube-proxy's selector leaves out, are still fetched
	// from upstream after the last client that asked for them went away
	// (default DefaultOnDemandIdleTimeout).
	OnDemandIdleTimeout time.Duration
	// NodeLabelRecheckInterval is how often a wrapper that watches every
	// Node because the controller writes no NodeLabelSummaries looks again
	// (default DefaultNodeLabelRecheckInterval).
	NodeLabelRecheckInterval time.Duration
	// SnapshotInterval is the most often a snapshot is written after a
	// change (default DefaultSnapshotInterval); one more is written on a
	// clean shutdown.
	SnapshotInterval time.Duration
	// SnapshotMaxAge ignores snapshots written longer ago (0:
	// DefaultSnapshotMaxAge; negative: no limit).
	SnapshotMaxAge time.Duration
	// RequestWriteTimeout bounds the write of every answer but a watch
	// (default DefaultRequestWriteTimeout).
	RequestWriteTimeout time.Duration
	// MaxRequestsInFlight caps requests other than watches served at once,
	// MaxWatches watches; beyond, 429 with Retry-After (defaults
	// DefaultMaxRequestsInFlight, DefaultMaxWatches).
	MaxRequestsInFlight, MaxWatches int
	// MaxRequestsInFlightPerUID and MaxWatchesPerUID are what the clients
	// of one local user other than root (by the uid owning the client's
	// socket; ConnContext) may hold of those, at most half of each:
	// root's clients (kube-proxy, the node's CoreDNS) always keep as much
	// (default a quarter of each, at least 1).
	MaxRequestsInFlightPerUID, MaxWatchesPerUID int
	// LocalEndpointRanges bound where the local-endpoint annotations may
	// redirect default/kubernetes (nil: DefaultLocalEndpointRanges).
	LocalEndpointRanges []netip.Prefix
	// LocalEndpointPorts are the ports they may name (nil:
	// DefaultLocalEndpointPorts).
	LocalEndpointPorts []int32
	// localAddr tells this node's addresses (tests; nil: its interfaces').
	localAddr func(netip.Addr) bool
	// summariesInFull lists the NodeLabelSummaries in full at every relist
	// rather than by their metadata first (nodelabels.Source.FullRelists):
	// only the benchmark measuring what the metadata saves sets it.
	summariesInFull bool
	// SiteStream, when set, shares one upstream stream of Services and
	// EndpointSlices among the wrappers of a site (package sitestream).
	SiteStream *sitestream.Options
	// AllowedHosts are the Host names (besides localhost and loopback
	// addresses, always accepted) requests may carry; "*" accepts any.
	AllowedHosts []string
}

// Defaults of Options, the command's flags' too (the other defaults live
// beside what they bound: limits.go, demand.go, nodelabels.go,
// localendpoint.go, snapshot_trust.go).
const (
	DefaultBookmarkInterval  = 30 * time.Second
	DefaultWatchWriteTimeout = 30 * time.Second
	// The event log's bounds, per resource.
	DefaultEventLogBytes    = 4 << 20
	DefaultWatchMaxLagBytes = 64 << 20
	// DefaultSnapshotInterval: gridhosts' bound too.
	DefaultSnapshotInterval = snapshottrust.DefaultWriteInterval
)

// withDefaults checks the required options and fills in the defaults.
func (opts Options) withDefaults() (Options, error) {
	if opts.NodeName == "" {
		return opts, errors.New("node name is required")
	}
	if opts.Upstream == nil {
		return opts, errors.New("upstream config is required")
	}
	orDefault(&opts.BookmarkInterval, DefaultBookmarkInterval)
	orDefault(&opts.EventLogBytes, DefaultEventLogBytes)
	orDefault(&opts.WatchMaxLagBytes, DefaultWatchMaxLagBytes)
	orDefault(&opts.WatchWriteTimeout, DefaultWatchWriteTimeout)
	if opts.SnapshotMaxAge == 0 { // negative: no limit
		opts.SnapshotMaxAge = DefaultSnapshotMaxAge
	}
	orDefault(&opts.RequestWriteTimeout, DefaultRequestWriteTimeout)
	orDefault(&opts.MaxRequestsInFlight, DefaultMaxRequestsInFlight)
	orDefault(&opts.MaxWatches, DefaultMaxWatches)
	orDefault(&opts.MaxRequestsInFlightPerUID, max(1, opts.MaxRequestsInFlight/4))
	orDefault(&opts.MaxWatchesPerUID, max(1, opts.MaxWatches/4))
	if err := CheckUIDBudget("MaxRequestsInFlightPerUID", opts.MaxRequestsInFlightPerUID, "MaxRequestsInFlight", opts.MaxRequestsInFlight); err != nil {
		return opts, err
	}
	if err := CheckUIDBudget("MaxWatchesPerUID", opts.MaxWatchesPerUID, "MaxWatches", opts.MaxWatches); err != nil {
		return opts, err
	}
	orDefault(&opts.StartVersion, uint64(time.Now().UnixNano()))
	orDefault(&opts.NodeLabelRecheckInterval, DefaultNodeLabelRecheckInterval)
	orDefault(&opts.SnapshotInterval, DefaultSnapshotInterval)
	return opts, nil
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | int64 | uint64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
