package wrapper

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
