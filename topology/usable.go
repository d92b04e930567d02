package topology

import discoveryv1 "k8s.io/api/discovery/v1"

// Which endpoints count is the one place the two consumers of the rule
// differ, on purpose:
//
//   - ProxyUsable (the wrapper, for kube-proxy): ready, or serving while
//     terminating. kube-proxy sends new connections to ready endpoints and,
//     when a Service has none ready, to serving terminating ones; so a
//     nodeunit whose endpoints are all draining keeps its key, and its
//     traffic drains inside the nodeunit instead of moving to the next key.
//   - DNSUsable (gridhosts, for headless names): ready only, as CoreDNS's
//     kubernetes plugin answers. A DNS answer is cached for its TTL and
//     cannot steer away from a draining endpoint per connection, so a
//     terminating endpoint is neither answered nor allowed to keep its key:
//     the next key with ready endpoints answers.
//
// Unset ready counts as ready in both (the EndpointSlice API's meaning).

// ProxyUsable reports whether an endpoint can decide a topology key for
// kube-proxy: ready, or serving.
func ProxyUsable(c discoveryv1.EndpointConditions) bool {
	return c.Ready == nil || *c.Ready || (c.Serving != nil && *c.Serving)
}

// DNSUsable reports whether a DNS answer names an endpoint, and whether it
// can decide a topology key for a headless name: ready only.
func DNSUsable(c discoveryv1.EndpointConditions) bool {
	return c.Ready == nil || *c.Ready
}
