package wrapper

import (
	"net"
	"net/netip"
)

// DefaultLocalEndpointRanges are where default/kubernetes may be redirected
// unless the operator says otherwise: addresses that stay on the node
// (loopback) or on its link (link-local), where a node-local
// (lite-)apiserver listens. Whoever may update Endpoints or EndpointSlices
// in "default" writes the annotations; without this bound they could send
// every edge pod's apiserver traffic, service account tokens included,
// to any address.
var DefaultLocalEndpointRanges = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
}

// DefaultLocalEndpointPorts are the ports default/kubernetes may be
// redirected to unless the operator says otherwise: SuperEdge's
// lite-apiserver's. Any other local port (the kubelet's, the wrapper's, a
// process an attacker runs on the node) would receive every edge pod's
// apiserver traffic, service account tokens included.
var DefaultLocalEndpointPorts = []int32{51003}

// onThisNode reports whether addr is an address of one of this node's
// interfaces (the wrapper runs in the node's network namespace): a
// link-local address may belong to another device on the site's LAN.
func onThisNode(addr netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == addr {
			return true
		}
	}
	return false
}

// shareTop returns a new top-level struct sharing everything p points to:
// the rewrite sets its own fields on it while the rest stays the informer
// cache's object, which nobody modifies (client-go's contract).
func shareTop[T any](p *T) *T {
	c := *p
	return &c
}
