package gridhosts

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// The records an answer is made of, built from the index; the handler
// (gridhosts.go) decides which name is asked and when to answer.

// found is whether a name is one gridhosts answers, for this client.
type found int

const (
	answered      found = iota // the name is ours: records or NODATA
	notOurs                    // next plugin (fallthrough) or NXDOMAIN
	unknownClient              // clients mode, a source it cannot place and no node: as notOurs, counted apart
	absentMember               // a known grid's unified name with no member pod now: as notOurs, the denial kept no longer than ours
)

// lookup builds the answer for q, a Service or SRV name (asked as qname;
// unified names are answered by the handler itself, gridhosts.go),
// from x as viewer v sees it. An existing name with no records of type
// qtype returns an empty answer (NODATA).
func (g *GridHosts) lookup(x indexReader, v index.Viewer, qtype uint16, qname string, q *queryName, zone string) (answer, extra []dns.RR, f found) {
	switch q.kind {
	case nameService, nameSRV:
		h := x.Headless(v, q.Namespace, q.Service, g.RestrictKeys)
		switch {
		case !h.Placed:
			return nil, nil, unknownClient
		case !h.Found:
			return nil, nil, notOurs
		}
		if h.Forgeable != nil {
			g.keyTrust.serviceKeys(q.Namespace, q.Service, h.Forgeable)
		}
		if q.kind == nameSRV {
			want := func(p index.SlicePort) bool {
				return strings.EqualFold(p.Name, q.port) && strings.EqualFold(p.Protocol, q.proto)
			}
			if !slices.ContainsFunc(h.Ports, want) {
				return nil, nil, notOurs
			}
			if qtype == dns.TypeSRV {
				answer, extra = g.srvRecords(qname, q, zone, h.Endpoints, want)
			}
			return answer, extra, answered
		}
		switch qtype {
		case dns.TypeA, dns.TypeAAAA:
			var ips []netip.Addr
			for _, e := range h.Endpoints {
				ips = append(ips, e.IPs...)
			}
			answer = g.addressRecords(qname, qtype, uniqueAddrs(ips))
		case dns.TypeSRV:
			answer, extra = g.srvRecords(qname, q, zone, h.Endpoints, nil)
		}
		return answer, extra, answered
	}
	return nil, nil, notOurs
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
func (g *GridHosts) srvRecords(name string, q *queryName, zone string, eps []index.LocalEndpoint, want func(index.SlicePort) bool) (answer, extra []dns.RR) {
	type srvKey struct {
		target string
		port   uint16
	}
	suffix := q.Service + "." + q.Namespace + ".svc." + zone
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
		for _, p := range e.Ports {
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
