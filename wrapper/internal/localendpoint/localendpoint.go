// Package localendpoint reads the superedge.io/local-endpoint and
// superedge.io/local-port annotations of default/kubernetes and rewrites
// its Endpoints and EndpointSlices to the node-local (lite-)apiserver they
// name. It is apart from the wrapper so that fuzzing the annotations'
// parser compiles only what it needs.
package localendpoint

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// Endpoint is the node-local (lite-)apiserver that default/kubernetes is
// rewritten to, so in-cluster clients on an edge node reach it.
type Endpoint struct {
	IP   netip.Addr
	Port int32
}

// Allowed says why the endpoint may not be redirected to ("" when it may):
// its address must lie in ranges and be loopback or this node's (isLocal),
// its port one of ports.
func (l Endpoint) Allowed(ranges []netip.Prefix, ports []int32, isLocal func(netip.Addr) bool) string {
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
func (l Endpoint) within(ranges []netip.Prefix) bool {
	for _, r := range ranges {
		if r.Contains(l.IP) {
			return true
		}
	}
	return false
}

// Parse reads superedge.io/local-endpoint and
// superedge.io/local-port. found is false when neither is set.
func Parse(annotations map[string]string) (le Endpoint, found bool, err error) {
	ipText, hasIP := annotations[superedgev1.AnnotationLocalEndpoint]
	portText, hasPort := annotations[superedgev1.AnnotationLocalPort]
	if !hasIP && !hasPort {
		return Endpoint{}, false, nil
	}
	if !hasIP || !hasPort {
		return Endpoint{}, true, fmt.Errorf("both %s and %s must be set", superedgev1.AnnotationLocalEndpoint, superedgev1.AnnotationLocalPort)
	}
	ip, err := netip.ParseAddr(ipText)
	if err != nil || ip.Zone() != "" || ip.IsUnspecified() {
		return Endpoint{}, true, fmt.Errorf("%s=%q is not an IP address", superedgev1.AnnotationLocalEndpoint, ipText)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return Endpoint{}, true, fmt.Errorf("%s=%q is not a port number", superedgev1.AnnotationLocalPort, portText)
	}
	return Endpoint{IP: ip.Unmap(), Port: int32(port)}, true, nil
}

func (l Endpoint) addressType() discoveryv1.AddressType {
	if l.IP.Is4() {
		return discoveryv1.AddressTypeIPv4
	}
	return discoveryv1.AddressTypeIPv6
}

// RewriteEndpoints returns a copy of ep serving only the local endpoint,
// keeping the name of its first port.
func (l Endpoint) RewriteEndpoints(ep *corev1.Endpoints) *corev1.Endpoints {
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
func (l Endpoint) RewriteSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
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
