package wrapper

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// LocalEndpoint is the node-local (lite-)apiserver that default/kubernetes is
// rewritten to, so in-cluster clients on an edge node reach it.
type LocalEndpoint struct {
	IP   netip.Addr
	Port int32
}

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

// allowed says why the endpoint may not be redirected to ("" when it may):
// its address must lie in ranges and be loopback or this node's (isLocal),
// its port one of ports.
func (l LocalEndpoint) allowed(ranges []netip.Prefix, ports []int32, isLocal func(netip.Addr) bool) string {
	switch {
	case !l.within(ranges):
		return fmt.Sprintf("%s is outside the ranges it may point to (%v): set them on the node (--local-endpoint-ranges) to allow it", l.IP, ranges)
	case !l.IP.IsLoopback() && !isLocal(l.IP):
		return fmt.Sprintf("%s is no address of this node: a link-local address may be another device's on the site's network", l.IP)
	case !slices.Contains(ports, l.Port):
		return fmt.Sprintf("port %d is not one it may point to (%v): set them on the node (--local-endpoint-ports) to allow it", l.Port, ports)
	}
	return ""
}

// within reports whether the endpoint's address is in one of ranges.
func (l LocalEndpoint) within(ranges []netip.Prefix) bool {
	for _, r := range ranges {
		if r.Contains(l.IP) {
			return true
		}
	}
	return false
}

// ParseLocalEndpoint reads superedge.io/local-endpoint and
// superedge.io/local-port. found is false when neither is set.
func ParseLocalEndpoint(annotations map[string]string) (le LocalEndpoint, found bool, err error) {
	ipText, hasIP := annotations[superedgev1.AnnotationLocalEndpoint]
	portText, hasPort := annotations[superedgev1.AnnotationLocalPort]
	if !hasIP && !hasPort {
		return LocalEndpoint{}, false, nil
	}
	if !hasIP || !hasPort {
		return LocalEndpoint{}, true, fmt.Errorf("both %s and %s must be set", superedgev1.AnnotationLocalEndpoint, superedgev1.AnnotationLocalPort)
	}
	ip, err := netip.ParseAddr(ipText)
	if err != nil || ip.Zone() != "" || ip.IsUnspecified() {
		return LocalEndpoint{}, true, fmt.Errorf("%s=%q is not an IP address", superedgev1.AnnotationLocalEndpoint, ipText)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return LocalEndpoint{}, true, fmt.Errorf("%s=%q is not a port number", superedgev1.AnnotationLocalPort, portText)
	}
	return LocalEndpoint{IP: ip.Unmap(), Port: int32(port)}, true, nil
}

func (l LocalEndpoint) addressType() discoveryv1.AddressType {
	if l.IP.Is4() {
		return discoveryv1.AddressTypeIPv4
	}
	return discoveryv1.AddressTypeIPv6
}

// RewriteEndpoints returns a copy of ep serving only the local endpoint,
// keeping the name of its first port.
func (l LocalEndpoint) RewriteEndpoints(ep *corev1.Endpoints) *corev1.Endpoints {
	c := shareTop(ep)
	port := corev1.EndpointPort{Name: "https", Port: l.Port, Protocol: corev1.ProtocolTCP}
	if len(ep.Subsets) > 0 && len(ep.Subsets[0].Ports) > 0 {
		port.Name = ep.Subsets[0].Ports[0].Name
	}
	c.Subsets = []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: l.IP.String()}},
		Ports:     []corev1.EndpointPort{port},
	}}
	return c
}

// RewriteSlice returns a copy of s serving only the local endpoint; a slice of
// the other address family is served empty.
func (l LocalEndpoint) RewriteSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	c := shareTop(s)
	if s.AddressType != l.addressType() {
		c.Endpoints = []discoveryv1.Endpoint{}
		return c
	}
	name, proto, port := "https", corev1.ProtocolTCP, l.Port
	if len(s.Ports) > 0 && s.Ports[0].Name != nil {
		name = *s.Ports[0].Name
	}
	ready := true
	c.Endpoints = []discoveryv1.Endpoint{{
		Addresses:  []string{l.IP.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: new(bool)},
	}}
	c.Ports = []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}}
	return c
}

// shareTop returns a new top-level struct sharing everything p points to:
// the rewrite sets its own fields on it while the rest stays the informer
// cache's object, which nobody modifies (client-go's contract).
func shareTop[T any](p *T) *T {
	c := *p
	return &c
}
