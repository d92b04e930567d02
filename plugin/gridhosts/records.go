package gridhosts

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// The records an answer is made of, built from the index; the handler
// (gridhosts.go) decides which name is asked and when to answer.

// serviceKeys are the topology keys of the headless grid Service
// namespace/service that gridhosts answers by (the trusted ones under
// RestrictKeys), and whether it is one. A grid Service left with no trusted
// key is still ours and gets no endpoints, as the wrapper serves it to
// kube-proxy: passed on, the next plugin would answer every nodeunit's.
func (g *GridHosts) serviceKeys(x *Index, namespace, service string) ([]string, bool) {
	sv, keys := x.gridService(namespace, service)
	if sv == nil {
		return nil, false
	}
	if g.RestrictKeys {
		keys = g.keyTrust.serviceKeys(namespace, service, keys)
	}
	return keys, true
}

// lookup builds the answer for q (asked as qname) from x as seen from node. exists is false when
// the name is not one gridhosts serves; an existing name with no records of
// the asked type returns an empty answer (NODATA). Callers hold the lock.
func (g *GridHosts) lookup(x *Index, state request.Request, qname string, q queryName, node *nodeObj, zone string) (answer, extra []dns.RR, exists bool) {
	switch q.kind {
	case nameMember:
		gr := x.gridOf(q.namespace, q.grid, q.service, nodeLabelsOf(node))
		if gr != nil && g.RestrictKeys && !g.keyTrust.gridKey(q.namespace, q.grid, gr.Key) {
			return nil, nil, false
		}
		p := x.memberOf(gr, q.namespace, q.ordinal, q.service, node)
		if p == nil {
			return nil, nil, false
		}
		return g.addressRecords(qname, state.QType(), p.IPs), nil, true
	case nameService:
		keys, ok := g.serviceKeys(x, q.namespace, q.service)
		if !ok {
			return nil, nil, false
		}
		eps, _ := x.localEndpoints(q.namespace, q.service, keys, node)
		switch state.QType() {
		case dns.TypeA, dns.TypeAAAA:
			var ips []netip.Addr
			for _, e := range eps {
				ips = append(ips, e.IPs...)
			}
			answer = g.addressRecords(qname, state.QType(), uniqueAddrs(ips))
		case dns.TypeSRV:
			answer, extra = g.srvRecords(qname, q, zone, eps, nil)
		}
		return answer, extra, true
	case nameSRV:
		keys, ok := g.serviceKeys(x, q.namespace, q.service)
		if !ok {
			return nil, nil, false
		}
		eps, ports := x.localEndpoints(q.namespace, q.service, keys, node)
		want := func(p slicePort) bool {
			return strings.EqualFold(p.Name, q.port) && strings.EqualFold(p.Protocol, q.proto)
		}
		if !slices.ContainsFunc(ports, want) {
			return nil, nil, false
		}
		if state.QType() == dns.TypeSRV {
			answer, extra = g.srvRecords(qname, q, zone, eps, want)
		}
		return answer, extra, true
	}
	return nil, nil, false
}

// uniqueAddrs drops repeated addresses (an endpoint listed in two slices)
// keeping the first occurrence's order.
func uniqueAddrs(ips []netip.Addr) []netip.Addr {
	out := ips[:0:0]
	for _, ip := range ips {
		if !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}

func (g *GridHosts) addressRecords(name string, qtype uint16, ips []netip.Addr) []dns.RR {
	var out []dns.RR
	for _, ip := range ips {
		switch {
		case qtype == dns.TypeA && ip.Is4():
			out = append(out, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: g.TTL}, A: net.IP(ip.AsSlice())})
		case qtype == dns.TypeAAAA && ip.Is6():
			out = append(out, &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: g.TTL}, AAAA: net.IP(ip.AsSlice())})
		}
	}
	return out
}

// srvRecords answers SRV with one record per endpoint and port of that
// endpoint's own EndpointSlice (only the ports want accepts, nil = all).
// Targets are the endpoint's hostname under the Service (a StatefulSet
// pod's own name, which the kubernetes plugin resolves) or, without one, the
// dashed address form the kubernetes plugin uses; their addresses go in the
// extra section. A target and port seen twice (an endpoint in two slices)
// is answered once.
func (g *GridHosts) srvRecords(name string, q queryName, zone string, eps []localEndpoint, want func(slicePort) bool) (answer, extra []dns.RR) {
	type srvKey struct {
		target string
		port   uint16
	}
	suffix := q.service + "." + q.namespace + ".svc." + zone
	var recs []srvKey
	seen := map[srvKey]bool{}
	targets := map[string][]netip.Addr{}
	var order []string
	for _, e := range eps {
		label := e.Hostname
		if label == "" {
			label = dashed(e.IPs[0])
		}
		target := label + "." + suffix
		for _, p := range e.ports {
			if want != nil && !want(p) {
				continue
			}
			k := srvKey{target, p.Port}
			if seen[k] {
				continue
			}
			seen[k] = true
			recs = append(recs, k)
			if _, ok := targets[target]; !ok {
				order = append(order, target)
			}
			targets[target] = uniqueAddrs(append(targets[target], e.IPs...))
		}
	}
	if len(recs) == 0 {
		return nil, nil
	}
	weight := uint16(max(1, 100/len(order)))
	for _, r := range recs {
		answer = append(answer, &dns.SRV{
			Hdr:      dns.RR_Header{Name: name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: g.TTL},
			Priority: 0, Weight: weight, Port: r.port, Target: r.target,
		})
	}
	for _, t := range order {
		extra = append(extra, g.addressRecords(t, dns.TypeA, targets[t])...)
		extra = append(extra, g.addressRecords(t, dns.TypeAAAA, targets[t])...)
	}
	return answer, extra
}

// dashed writes an address as one DNS label: 10.0.0.1 -> 10-0-0-1,
// fd00::1 -> fd00--1.
func dashed(ip netip.Addr) string {
	s := ip.String()
	if ip.Is4() {
		return strings.ReplaceAll(s, ".", "-")
	}
	return strings.ReplaceAll(s, ":", "-")
}

// soa is the zone's SOA for negative answers.
func (g *GridHosts) soa(zone string) dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: g.TTL},
		Ns:      dnsJoin("ns.dns", zone),
		Mbox:    dnsJoin("hostmaster", zone),
		Serial:  1,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  g.TTL,
	}
}

func dnsJoin(label, zone string) string {
	if zone == "." {
		return label + "."
	}
	return label + "." + zone
}
