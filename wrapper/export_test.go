package wrapper

import (
	"net/netip"
	"slices"
)

// SiteStreamSource is the node whose wrapper this one reads Services and
// EndpointSlices from: "" for the apiserver (no leader, this wrapper
// leads, or its leader is given up).
func (s *Server) SiteStreamSource() string {
	if s.site == nil {
		return ""
	}
	return s.site.Source()
}

// SiteStreamFailedRequests counts the lists and watches of Services and
// EndpointSlices that failed back to this wrapper's informers.
func (s *Server) SiteStreamFailedRequests() int64 {
	if s.site == nil {
		return 0
	}
	return s.site.FailedRequests()
}

// SiteStreamPauses counts how often this wrapper, leading, stopped serving
// its peers because its Lease was not renewed lately.
func (s *Server) SiteStreamPauses() int64 {
	if s.site == nil {
		return 0
	}
	return s.site.Pauses()
}

// SiteStreamLeaderGiveUps counts how often this wrapper gave up its leader
// and read from the apiserver instead.
func (s *Server) SiteStreamLeaderGiveUps() int64 {
	if s.site == nil {
		return 0
	}
	return s.site.LeaderGiveUps()
}

// FetchingEndpoints tells whether v1 Endpoints are being fetched from
// upstream (only while a client asks for them).
func (s *Server) FetchingEndpoints() bool { return s.endpoints.Fetching() }

// FetchingUnproxied tells whether the Services and EndpointSlices outside
// kube-proxy's selector are being fetched from upstream.
func (s *Server) FetchingUnproxied() bool { return s.unproxied.Fetching() }

// NodeLabelSource tells where other nodes' labels come from now:
// "summaries", "nodes", or "" before upstream first answered.
func (s *Server) NodeLabelSource() string { return s.nodeLabels.From() }

// WithLocalAddrs makes addrs this node's addresses for the local-endpoint
// rule (a test cannot put them on the machine's interfaces).
func WithLocalAddrs(o Options, addrs ...string) Options {
	o.localAddr = func(a netip.Addr) bool { return slices.Contains(addrs, a.String()) }
	return o
}

// WithSummariesRelistedInFull makes the wrapper list the NodeLabelSummaries
// in full at every relist, as before they were relisted by their metadata
// first (BenchmarkReconnectStorm compares).
func WithSummariesRelistedInFull(o Options) Options {
	o.summariesInFull = true
	return o
}
