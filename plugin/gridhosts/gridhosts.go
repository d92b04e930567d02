// Package gridhosts is a CoreDNS plugin that answers the unified names of
// SuperEdge StatefulSetGrids ({grid}-{ordinal}.{svc}.{ns}.svc.{zone}) and the
// names of headless grid Services with the pods of the querying side's
// nodeunit, straight from Kubernetes informers.
package gridhosts

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/pkg/nonwriter"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/config"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/informers"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

const pluginName = "gridhosts"

// GridHosts is the plugin handler.
type GridHosts struct {
	Next  plugin.Handler
	Zones []string
	Fall  fall.F
	TTL   uint32

	// Node is the node whose nodeunit answers are for; in clients mode,
	// the view for clients that are neither a known pod nor a node.
	Node string
	// Clients selects per-client answers by the query's source address.
	Clients bool
	// RestrictKeys treats keys a node's kubelet can set on its own Node
	// (any not under node-restriction.kubernetes.io/) as never matching.
	RestrictKeys bool
	keyTrust     keyTrust

	// ClientConfig reaches the apiserver; nil means in-cluster.
	ClientConfig clientcmd.ClientConfig
	// ServicesConfig, when set, is where Services and EndpointSlices are
	// read instead (the node wrapper's DNS view).
	ServicesConfig clientcmd.ClientConfig

	// index is what the informers deliver; queries read it through
	// indexReader.
	index   *index.Index
	synced  atomic.Bool
	watcher *informers.Watcher

	// snapshot, when configured, keeps the index on disk; snap is the
	// index read from it, answered from while the informers are not
	// known (nil otherwise). mode orders the switch to live answers.
	snapshot   *snapshot.Writer
	snap       atomic.Pointer[index.Index]
	mode       sync.Mutex
	snapCancel context.CancelFunc
	snapDone   chan struct{}
	// Before synced: whether grids and Services are already known, so a
	// name can be ruled out as a grid name. Nil means not known.
	gridsKnown, servicesKnown func() bool
}

// indexReader is all the handler reads of an index, the live one or a
// snapshot's (as CoreDNS's kubernetes plugin reads its dnsController): one
// call per query, each under the index's read lock, answered whole.
type indexReader interface {
	// Member resolves a unified name.
	Member(v *index.Viewer, q *index.MemberQuery) index.Member
	// Headless answers a headless grid Service's name; with restrict, keys
	// a node can set on itself never match.
	Headless(v index.Viewer, namespace, name string, restrict bool) index.Headless
	// NotGridName: a unified-name shape known not to be a grid name from
	// what has synced so far.
	NotGridName(q index.MemberQuery, servicesKnown, gridsKnown bool) bool
}

// New returns a GridHosts with defaults and an empty index (clients mode's,
// which answers node mode's queries too; setup makes the one of its mode).
func New(zones []string) *GridHosts {
	return &GridHosts{Zones: zones, TTL: config.DefaultTTL, index: index.New(index.Options{})}
}

// Name implements plugin.Handler.
func (g *GridHosts) Name() string { return pluginName }

// ServeDNS implements plugin.Handler.
//
// Each query runs on a goroutine of its own, which starts with a small
// stack: the frames on the answer path are kept small (no request.Request,
// arguments by pointer, a unified name answered in this frame, one above
// the index) so that an answer needs no more stack than the hosts plugin's
// (TestAnswerStackNoDeeperThanHosts; issue 49's profile had a fifth of the
// CPU in stack growth).
func (g *GridHosts) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	n := askedName(r)
	zone := zoneOf(g.Zones, n.lower)
	if zone == "" {
		return plugin.NextOrFailure(g.Name(), g.Next, ctx, w, r)
	}
	q := parseName(n.lower, zone)
	if q.kind == nameNone {
		return g.miss(ctx, w, r, &n, zone, false)
	}
	x := g.index
	if !g.synced.Load() {
		// Not synced: answer from the snapshot if one was read, else as
		// if gridhosts were not there.
		if x = g.snap.Load(); x == nil {
			return g.beforeSync(ctx, w, r, &n, &q, zone)
		}
	}

	origZone := n.orig[len(n.lower)-len(zone):] // keep the query's case
	var answer, extra []dns.RR
	var found found
	if q.kind == nameMember {
		v := g.viewer(w)
		m := x.Member(&v, &q.MemberQuery)
		switch {
		case !m.Placed:
			found = unknownClient
		case m.HasGrid && g.RestrictKeys && !g.keyTrust.gridKey(q.Namespace, q.Grid, m.GridKey):
			found = notOurs
		case m.Pod == nil && m.HasGrid:
			found = absentMember
		case m.Pod == nil:
			found = notOurs
		default:
			answer = g.addressRecords(n.orig, r.Question[0].Qtype, m.Pod.IPs)
		}
	} else {
		answer, extra, found = g.lookup(x, g.viewer(w), r.Question[0].Qtype, n.orig, &q, origZone)
	}
	switch found {
	case unknownClient:
		return g.miss(ctx, w, r, &n, zone, true)
	case notOurs:
		return g.miss(ctx, w, r, &n, zone, false)
	case absentMember:
		return g.absent(ctx, w, r, &n, zone)
	}
	g.reply(w, r, answer, extra, origZone)
	return dns.RcodeSuccess, nil
}

// reply writes the answer to r: answer and extra, or NODATA (zone's SOA)
// without answer. Not inlined: its locals stay out of ServeDNS's frame,
// which is on the stack under every index lookup.
//
//go:noinline
func (g *GridHosts) reply(w dns.ResponseWriter, r *dns.Msg, answer, extra []dns.RR, zone string) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(answer) == 0 {
		resultNoData.Inc()
		m.Ns = []dns.RR{g.soa(zone)}
	} else {
		resultAnswer.Inc()
		recordsServed.Add(float64(len(answer)))
		m.Answer = answer
		m.Extra = extra
	}
	w.WriteMsg(m)
}

// asked is the query name, converted to presentation format once per query
// (dns.Name.String is the largest cost of an answer; request.Request's
// QName and Name each convert again).
type asked struct {
	orig  string // as the client wrote it: answers keep its case
	lower string // what request.Request's Name returns
}

// askedName is r's question name as request.Request's QName gives it ("."
// without a question).
func askedName(r *dns.Msg) asked {
	orig := "."
	if len(r.Question) > 0 {
		orig = dns.Name(r.Question[0].Name).String()
	}
	return asked{orig: orig, lower: strings.ToLower(orig)}
}

// miss handles a name that is not ours: the next plugin with fallthrough,
// else NXDOMAIN with our SOA. Each query is counted once: as
// unknown_client when that is why it missed.
func (g *GridHosts) miss(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, n *asked, zone string, unknownClient bool) (int, error) {
	count := func(c prometheus.Counter) {
		if unknownClient {
			c = resultUnknown
		}
		c.Inc()
	}
	if g.Fall.Through(n.lower) {
		count(resultFallthrough)
		return plugin.NextOrFailure(g.Name(), g.Next, ctx, w, r)
	}
	count(resultNXDomain)
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeNameError)
	m.Authoritative = true
	m.Ns = []dns.RR{g.soa(n.orig[len(n.orig)-len(zone):])}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// absent handles the unified name of a grid gridhosts knows whose member
// in the viewer's nodeunit has no usable pod now (not yet created, being
// replaced, no address): as a name not ours (the next plugin may know it),
// but a denial from the next plugin is kept no longer than gridhosts' own
// TTL. The kubernetes plugin denies with its own TTL (30 s as shipped) as
// the SOA minimum, which the node's cache and the clients' resolvers would
// keep (RFC 2308) after the pod is back: a StatefulSetGrid pod replaced on
// another node would stay unresolvable that long once Ready.
//
//go:noinline
func (g *GridHosts) absent(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, n *asked, zone string) (int, error) {
	if !g.Fall.Through(n.lower) || g.Next == nil {
		return g.miss(ctx, w, r, n, zone, false)
	}
	resultFallthrough.Inc()
	nw := nonwriter.New(w)
	code, err := plugin.NextOrFailure(g.Name(), g.Next, ctx, nw, r)
	if nw.Msg == nil {
		return code, err // the next plugin failed without writing: the server answers its rcode
	}
	if negative(nw.Msg) {
		capDenialTTL(nw.Msg, g.TTL)
	}
	w.WriteMsg(nw.Msg)
	return code, err
}

// capDenialTTL lowers the SOA records of a negative answer to at most ttl
// seconds, in both the record's TTL and its MINIMUM: a resolver caches a
// denial for the lower of the two (RFC 2308 section 5).
func capDenialTTL(m *dns.Msg, ttl uint32) {
	for _, rr := range m.Ns {
		soa, ok := rr.(*dns.SOA)
		if !ok {
			continue
		}
		soa.Hdr.Ttl = min(soa.Hdr.Ttl, ttl)
		soa.Minttl = min(soa.Minttl, ttl)
	}
}

// beforeSync answers a name of a grid shape while gridhosts cannot serve
// grid names yet (informers not synced: apiserver slow or unreachable, a
// resource forbidden). Every such name goes to the next plugin, as without
// gridhosts. Its answer is passed on as it is, except a negative answer to
// a unified-name shape that gridhosts cannot yet rule out (its Service
// known not to be a grid Service, or its grid known not to exist): the
// kubernetes plugin never knows unified names, clients would cache its
// NXDOMAIN, so that becomes SERVFAIL. Headless Service names need no such
// guard: a Service the next plugin denies has no endpoints anywhere.
func (g *GridHosts) beforeSync(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, n *asked, q *queryName, zone string) (int, error) {
	if q.kind != nameMember || g.notGridName(q) {
		return g.miss(ctx, w, r, n, zone, false)
	}
	if !g.Fall.Through(n.lower) || g.Next == nil {
		resultNotSynced.Inc()
		return dns.RcodeServerFailure, nil
	}
	nw := nonwriter.New(w)
	code, err := plugin.NextOrFailure(g.Name(), g.Next, ctx, nw, r)
	if nw.Msg != nil && !negative(nw.Msg) {
		resultFallthrough.Inc()
		w.WriteMsg(nw.Msg)
		return code, err
	}
	resultNotSynced.Inc()
	if nw.Msg == nil && !plugin.ClientWrite(code) {
		return code, err // the next plugin failed without writing: the server answers its rcode
	}
	return dns.RcodeServerFailure, nil
}

// negative reports whether m is an answer resolvers cache as a denial
// (RFC 2308): NXDOMAIN, or NOERROR without answers (NODATA).
func negative(m *dns.Msg) bool {
	return m.Rcode == dns.RcodeNameError || (m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0)
}

// notGridName reports whether the unified-name shape q is known not to be
// a grid name from what has synced so far.
func (g *GridHosts) notGridName(q *queryName) bool {
	servicesKnown := g.servicesKnown != nil && g.servicesKnown()
	gridsKnown := g.gridsKnown != nil && g.gridsKnown()
	var x indexReader = g.index
	return x.NotGridName(q.MemberQuery, servicesKnown, gridsKnown)
}

// viewer is whose nodeunit this query is answered for: the client's (by its
// source address) in clients mode, else, or when the client is unknown, the
// fixed node's. Not inlined, as reply.
//
//go:noinline
func (g *GridHosts) viewer(w dns.ResponseWriter) index.Viewer {
	v := index.Viewer{Node: g.Node, Clients: g.Clients}
	if g.Clients {
		v.Client, _ = remoteIP(w)
	}
	return v
}

func remoteIP(w dns.ResponseWriter) (netip.Addr, bool) {
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	case nil:
		return netip.Addr{}, false
	default:
		ap, err := netip.ParseAddrPort(a.String())
		return ap.Addr().Unmap(), err == nil
	}
}
