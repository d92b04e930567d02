package gridhosts

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/internal/fixtures"
)

const (
	demoSvc  = fixtures.DemoService
	demoName = "statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local."
	soaLine  = "cluster.local.	5	IN	SOA	ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5"
)

// demoObjects is SuperEdge's example (package fixtures).
var demoObjects = fixtures.Demo

func demoHandler(objs []any) *GridHosts {
	g := New([]string{"cluster.local."})
	for _, o := range objs {
		g.index.Upsert(o)
	}
	g.synced.Store(true)
	return g
}

func run(t *testing.T, g *GridHosts, remote string, cases []test.Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(dns.TypeToString[tc.Qtype]+" "+tc.Qname, func(t *testing.T) {
			rec := dnstest.NewRecorder(&test.ResponseWriter{RemoteIP: remote})
			if _, err := g.ServeDNS(context.Background(), rec, tc.Msg()); err != nil {
				t.Fatal(err)
			}
			if rec.Msg == nil {
				t.Fatal("no message written")
			}
			if err := test.SortAndCheck(rec.Msg, tc); err != nil {
				t.Error(err)
			}
		})
	}
}

func nxdomain(qname string, qtype uint16) test.Case {
	return test.Case{Qname: qname, Qtype: qtype, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soaLine)}}
}

func TestServeNodeMode(t *testing.T) {
	g := demoHandler(demoObjects())
	g.Node = "node-1"
	run(t, g, "", []test.Case{
		{Qname: demoName, Qtype: dns.TypeA, Answer: []dns.RR{test.A(demoName + "	5	IN	A	10.1.1.1")}},
		{Qname: "statefulsetgrid-demo-1.servicegrid-demo-svc.default.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("statefulsetgrid-demo-1.servicegrid-demo-svc.default.svc.cluster.local.	5	IN	A	10.1.1.2")}},
		{Qname: "StatefulSetGrid-Demo-0.servicegrid-demo-svc.default.svc.Cluster.Local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("StatefulSetGrid-Demo-0.servicegrid-demo-svc.default.svc.Cluster.Local.	5	IN	A	10.1.1.1")}},
		// Existing name, other type: NODATA.
		{Qname: demoName, Qtype: dns.TypeAAAA, Ns: []dns.RR{test.SOA(soaLine)}},
		{Qname: demoName, Qtype: dns.TypeTXT, Ns: []dns.RR{test.SOA(soaLine)}},
		// Not ours: NXDOMAIN with SOA (no fallthrough configured).
		nxdomain("statefulsetgrid-demo-2.servicegrid-demo-svc.default.svc.cluster.local.", dns.TypeA),
		nxdomain("statefulsetgrid-demo-0.other.default.svc.cluster.local.", dns.TypeA),
		nxdomain("statefulsetgrid-demo-0.servicegrid-demo-svc.other.svc.cluster.local.", dns.TypeA),
		nxdomain("statefulsetgrid-demo-00.servicegrid-demo-svc.default.svc.cluster.local.", dns.TypeA),
		nxdomain("statefulsetgrid-demo-nodeunit1-0.servicegrid-demo-svc.default.svc.cluster.local.", dns.TypeA),
		nxdomain("kubernetes.default.svc.cluster.local.", dns.TypeA),
		nxdomain("cluster.local.", dns.TypeA),
		// The grid name contains the nodeunit value.
		{Qname: "nodeunit1-db-0.db.default.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("nodeunit1-db-0.db.default.svc.cluster.local.	5	IN	A	10.9.0.1")}},
		// Headless grid Service: only ready endpoints of this nodeunit.
		{Qname: "hl.default.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("hl.default.svc.cluster.local.	5	IN	A	10.5.1.1")}},
		{Qname: "hl.default.svc.cluster.local.", Qtype: dns.TypeAAAA, Ns: []dns.RR{test.SOA(soaLine)}},
		{Qname: "_http._tcp.hl.default.svc.cluster.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_http._tcp.hl.default.svc.cluster.local.	5	IN	SRV	0 100 8080 hl-a.hl.default.svc.cluster.local.")},
			Extra:  []dns.RR{test.A("hl-a.hl.default.svc.cluster.local.	5	IN	A	10.5.1.1")}},
		{Qname: "hl.default.svc.cluster.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("hl.default.svc.cluster.local.	5	IN	SRV	0 100 8080 hl-a.hl.default.svc.cluster.local.")},
			Extra:  []dns.RR{test.A("hl-a.hl.default.svc.cluster.local.	5	IN	A	10.5.1.1")}},
		{Qname: "_http._tcp.hl.default.svc.cluster.local.", Qtype: dns.TypeA, Ns: []dns.RR{test.SOA(soaLine)}},
		nxdomain("_grpc._tcp.hl.default.svc.cluster.local.", dns.TypeSRV),
		// A grid Service that is not headless is the kubernetes plugin's.
		nxdomain(demoSvc+".default.svc.cluster.local.", dns.TypeA),
	})
}

func TestServeEachNodeunit(t *testing.T) {
	objs := demoObjects()
	for node, want := range map[string][]dns.RR{
		"node-2": {test.A(demoName + "	5	IN	A	10.1.2.1")},
		"node-3": {test.A(demoName + "	5	IN	A	10.1.3.1")},
	} {
		g := demoHandler(objs)
		g.Node = node
		run(t, g, "", []test.Case{{Qname: demoName, Qtype: dns.TypeA, Answer: want}})
	}
	g := demoHandler(objs)
	g.Node = "node-2"
	run(t, g, "", []test.Case{
		{Qname: demoName, Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA(demoName + "	5	IN	AAAA	fd00::2:1")}},
		{Qname: "hl.default.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("hl.default.svc.cluster.local.	5	IN	A	10.5.2.1")}},
	})
	g = demoHandler(objs)
	g.Node = "node-3"
	run(t, g, "", []test.Case{
		// Pod without an address is not served.
		nxdomain("statefulsetgrid-demo-1.servicegrid-demo-svc.default.svc.cluster.local.", dns.TypeA),
		// Headless Service with no ready endpoint in this nodeunit: NODATA.
		{Qname: "hl.default.svc.cluster.local.", Qtype: dns.TypeA, Ns: []dns.RR{test.SOA(soaLine)}},
	})
	for _, node := range []string{"node-4", "no-such-node"} {
		g = demoHandler(objs)
		g.Node = node
		run(t, g, "", []test.Case{nxdomain(demoName, dns.TypeA)})
	}
}

func TestServeClientsMode(t *testing.T) {
	g := demoHandler(demoObjects())
	g.Clients = true
	ans := func(ip string) test.Case {
		return test.Case{Qname: demoName, Qtype: dns.TypeA, Answer: []dns.RR{test.A(demoName + "	5	IN	A	" + ip)}}
	}
	run(t, g, "10.1.2.2", []test.Case{ans("10.1.2.1")}) // a pod in nodeunit2
	run(t, g, "10.1.3.1", []test.Case{ans("10.1.3.1")}) // a pod in nodeunit3
	run(t, g, "10.0.0.1", []test.Case{ans("10.1.1.1")}) // node-1's InternalIP
	run(t, g, "::ffff:10.0.0.2", []test.Case{ans("10.1.2.1")})
	run(t, g, "192.0.2.9", []test.Case{nxdomain(demoName, dns.TypeA)}) // unknown client

	g.Node = "node-3" // unknown clients get the fixed node's view
	run(t, g, "192.0.2.9", []test.Case{ans("10.1.3.1")})
	run(t, g, "10.0.0.1", []test.Case{ans("10.1.1.1")})
}

func TestServeFallthroughAndZones(t *testing.T) {
	g := demoHandler(demoObjects())
	g.Node = "node-1"
	g.Next = test.NextHandler(dns.RcodeRefused, nil)
	g.Fall = fall.Root

	for _, q := range []string{
		"kubernetes.default.svc.cluster.local.",
		"statefulsetgrid-demo-7.servicegrid-demo-svc.default.svc.cluster.local.",
		"example.org.",
	} {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		m := new(dns.Msg).SetQuestion(q, dns.TypeA)
		code, err := g.ServeDNS(context.Background(), rec, m)
		if err != nil || code != dns.RcodeRefused {
			t.Errorf("%s: got rcode %d, %v; want the next plugin's REFUSED", q, code, err)
		}
	}
	// Names of ours are still answered.
	run(t, g, "", []test.Case{{Qname: demoName, Qtype: dns.TypeA, Answer: []dns.RR{test.A(demoName + "	5	IN	A	10.1.1.1")}}})

	// Fallthrough limited to other zones: ours get NXDOMAIN.
	g.Fall = fall.F{}
	g.Fall.SetZonesFromArgs([]string{"example.org"})
	run(t, g, "", []test.Case{nxdomain("statefulsetgrid-demo-7.servicegrid-demo-svc.default.svc.cluster.local.", dns.TypeA)})
}

// answerNext is a next plugin that answers every query with rcode and, for
// NOERROR, one A record.
func answerNext(rcode int) plugin.Handler {
	return plugin.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		m := new(dns.Msg)
		m.SetRcode(r, rcode)
		if rcode == dns.RcodeSuccess {
			m.Answer = []dns.RR{test.A(r.Question[0].Name + "	5	IN	A	192.0.2.1")}
		}
		w.WriteMsg(m)
		return dns.RcodeSuccess, nil
	})
}

// TestServeBeforeSync: until gridhosts can serve grid names, names it can
// rule out go to the next plugin untouched; unified-name shapes get the
// next plugin's positive answers only, never a negative one.
func TestServeBeforeSync(t *testing.T) {
	ask := func(g *GridHosts, name string) (int, *dns.Msg) {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		code, err := g.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(name, dns.TypeA))
		if err != nil {
			t.Fatal(err)
		}
		if plugin.ClientWrite(code) {
			return rec.Msg.Rcode, rec.Msg
		}
		return code, nil
	}
	notSynced := func(next plugin.Handler, grids, services bool) *GridHosts {
		g := demoHandler(demoObjects())
		g.Node = "node-1"
		g.synced.Store(false)
		g.Next = next
		g.Fall = fall.Root
		g.gridsKnown = func() bool { return grids }
		g.servicesKnown = func() bool { return services }
		return g
	}

	g := notSynced(nil, false, false)
	g.Fall = fall.F{}
	if code, _ := ask(g, demoName); code != dns.RcodeServerFailure {
		t.Errorf("no fallthrough: rcode %d, want SERVFAIL", code)
	}
	if g.Ready() {
		t.Error("Ready before sync")
	}

	for _, tc := range []struct {
		name        string
		qname       string
		next        int
		grids, svcs bool
		want        int
	}{
		{"positive answer passes", demoName, dns.RcodeSuccess, false, false, dns.RcodeSuccess},
		{"negative answer withheld", demoName, dns.RcodeNameError, false, false, dns.RcodeServerFailure},
		{"grid known, service unknown", demoName, dns.RcodeNameError, true, false, dns.RcodeServerFailure},
		{"grid known absent", "nogrid-0." + demoSvc + ".default.svc.cluster.local.", dns.RcodeNameError, true, false, dns.RcodeNameError},
		{"service known, not a grid service", "web-0.other.default.svc.cluster.local.", dns.RcodeNameError, false, true, dns.RcodeNameError},
		{"service known, a grid service", "web-0." + demoSvc + ".default.svc.cluster.local.", dns.RcodeNameError, false, true, dns.RcodeServerFailure},
		{"service name", "kubernetes.default.svc.cluster.local.", dns.RcodeNameError, false, false, dns.RcodeNameError},
		{"headless grid service", "hl.default.svc.cluster.local.", dns.RcodeNameError, false, true, dns.RcodeNameError},
		{"headless grid service, positive", "hl.default.svc.cluster.local.", dns.RcodeSuccess, false, true, dns.RcodeSuccess},
		{"SRV name", "_http._tcp.hl.default.svc.cluster.local.", dns.RcodeNameError, false, false, dns.RcodeNameError},
		{"not a grid shape", "cluster.local.", dns.RcodeNameError, false, false, dns.RcodeNameError},
		{"pod name", "10-0-0-1.default.pod.cluster.local.", dns.RcodeNameError, false, false, dns.RcodeNameError},
	} {
		g := notSynced(answerNext(tc.next), tc.grids, tc.svcs)
		if code, _ := ask(g, tc.qname); code != tc.want {
			t.Errorf("%s: %s rcode %s, want %s", tc.name, tc.qname, dns.RcodeToString[code], dns.RcodeToString[tc.want])
		}
	}
}

// TestConsistencyChecks breaks one link of the chain grid -> StatefulSet ->
// Service -> pod at a time: the unified name must then not be served.
func TestConsistencyChecks(t *testing.T) {
	mutate := func(f func(objs []any)) []any {
		objs := demoObjects()
		f(objs)
		return objs
	}
	set1 := func(objs []any) *appsv1.StatefulSet {
		for _, o := range objs {
			if s, ok := o.(*appsv1.StatefulSet); ok && s.Name == "statefulsetgrid-demo-nodeunit1" {
				return s
			}
		}
		panic("no set")
	}
	pod0 := func(objs []any) *corev1.Pod {
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok && p.Name == "statefulsetgrid-demo-nodeunit1-0" {
				return p
			}
		}
		panic("no pod")
	}
	svc := func(objs []any) *corev1.Service {
		for _, o := range objs {
			if s, ok := o.(*corev1.Service); ok && s.Name == demoSvc {
				return s
			}
		}
		panic("no svc")
	}
	for name, objs := range map[string][]any{
		"owner UID":        mutate(func(o []any) { set1(o).OwnerReferences[0].UID = "other" }),
		"owner kind":       mutate(func(o []any) { set1(o).OwnerReferences[0].Kind = "DeploymentGrid" }),
		"not controller":   mutate(func(o []any) { set1(o).OwnerReferences[0].Controller = nil }),
		"selector label":   mutate(func(o []any) { delete(set1(o).Labels, "superedge.io/grid-selector") }),
		"selector value":   mutate(func(o []any) { set1(o).Labels["superedge.io/grid-selector"] = "x" }),
		"uniq key label":   mutate(func(o []any) { set1(o).Labels["superedge.io/grid-uniq-key"] = "zone2" }),
		"service name":     mutate(func(o []any) { set1(o).Spec.ServiceName = "db" }),
		"node selector":    mutate(func(o []any) { set1(o).Spec.Template.Spec.NodeSelector["zone1"] = "nodeunit2" }),
		"service label":    mutate(func(o []any) { delete(svc(o).Labels, "superedge.io/grid-uniq-key") }),
		"service key":      mutate(func(o []any) { svc(o).Labels["superedge.io/grid-uniq-key"] = "zone9" }),
		"set terminating":  mutate(func(o []any) { set1(o).DeletionTimestamp = &metav1.Time{} }),
		"pod owner":        mutate(func(o []any) { pod0(o).OwnerReferences[0].UID = "other" }),
		"pod terminating":  mutate(func(o []any) { pod0(o).DeletionTimestamp = &metav1.Time{} }),
		"pod without IP":   mutate(func(o []any) { setPodIPs(pod0(o)) }),
		"pod failed":       mutate(func(o []any) { pod0(o).Status.Phase = corev1.PodFailed }),
		"pod not a member": mutate(func(o []any) { pod0(o).OwnerReferences[0].Name = "statefulsetgrid-demo-nodeunit2" }),
	} {
		t.Run(name, func(t *testing.T) {
			g := demoHandler(objs)
			g.Node = "node-1"
			run(t, g, "", []test.Case{nxdomain(demoName, dns.TypeA)})
		})
	}
}

// TestIncrementalUpdates drives the index with the events the informers
// would deliver and checks each is answerable at once.
func TestIncrementalUpdates(t *testing.T) {
	objs := demoObjects()
	g := demoHandler(objs)
	g.Node = "node-1"
	a := func(ip string) []test.Case {
		return []test.Case{{Qname: demoName, Qtype: dns.TypeA, Answer: []dns.RR{test.A(demoName + "	5	IN	A	" + ip)}}}
	}
	var pod *corev1.Pod
	var set *appsv1.StatefulSet
	var node *corev1.Node
	var svc *corev1.Service
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Pod:
			if v.Name == "statefulsetgrid-demo-nodeunit1-0" {
				pod = v.DeepCopy()
			}
		case *appsv1.StatefulSet:
			if v.Name == "statefulsetgrid-demo-nodeunit1" {
				set = v.DeepCopy()
			}
		case *corev1.Node:
			if v.Name == "node-1" {
				node = v.DeepCopy()
			}
		case *corev1.Service:
			if v.Name == demoSvc {
				svc = v.DeepCopy()
			}
		}
	}
	run(t, g, "", a("10.1.1.1"))

	setPodIPs(pod, "10.1.1.99")
	g.index.Upsert(pod)
	run(t, g, "", a("10.1.1.99"))

	g.index.Delete(pod)
	run(t, g, "", []test.Case{nxdomain(demoName, dns.TypeA)})
	g.index.Upsert(pod)
	run(t, g, "", a("10.1.1.99"))

	g.index.Delete(set)
	run(t, g, "", []test.Case{nxdomain(demoName, dns.TypeA)})
	g.index.Upsert(set)
	run(t, g, "", a("10.1.1.99"))

	svc.Labels["superedge.io/grid-uniq-key"] = "other"
	g.index.Upsert(svc)
	run(t, g, "", []test.Case{nxdomain(demoName, dns.TypeA)})
	svc.Labels["superedge.io/grid-uniq-key"] = "zone1"
	g.index.Upsert(svc)
	run(t, g, "", a("10.1.1.99"))

	node.Labels["zone1"] = "nodeunit3"
	g.index.Upsert(node)
	run(t, g, "", a("10.1.3.1"))

	g.index.Delete(newGrid("default", "statefulsetgrid-demo", "zone1", "ssg-uid"))
	run(t, g, "", []test.Case{nxdomain(demoName, dns.TypeA)})

	if grids := g.index.Counts().Grids; grids != 1 {
		t.Fatalf("%d grids left, want 1", grids)
	}
}

// With require_node_restricted_keys, a member name of a grid keyed on a
// label nodes set themselves (zone1) is not ours: it falls through, or is
// NXDOMAIN without fallthrough.
func TestServeForgeableGridKey(t *testing.T) {
	g := demoHandler(demoObjects())
	g.Node = "node-1"
	g.RestrictKeys = true
	g.Next = test.NextHandler(dns.RcodeRefused, nil)
	g.Fall = fall.Root
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	code, err := g.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(demoName, dns.TypeA))
	if err != nil || code != dns.RcodeRefused {
		t.Errorf("%s: got rcode %d, %v; want the next plugin's REFUSED", demoName, code, err)
	}
	g.Fall = fall.F{}
	run(t, g, "", []test.Case{nxdomain(demoName, dns.TypeA)})
	g.RestrictKeys = false
	run(t, g, "", []test.Case{{Qname: demoName, Qtype: dns.TypeA, Answer: []dns.RR{test.A(demoName + "	5	IN	A	10.1.1.1")}}})
}

// TestPrefixedGridKey serves a grid keyed on a prefixed node label, with
// children labelled and annotated as servicegroup's controller writes them.
func TestPrefixedGridKey(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	grid := newGrid("default", "web", zone, "web-uid")
	set := newSet(grid, "east", "websvc", "web-set", 1)
	set.Labels[superedgev1.LabelGridUniqKey] = superedgev1.GridUniqKeyLabelValue(zone)
	set.Annotations = map[string]string{superedgev1.AnnotationGridUniqKey: zone}
	svc := newService("default", "websvc", superedgev1.GridUniqKeyLabelValue(zone), false)
	svc.Annotations = map[string]string{superedgev1.AnnotationGridUniqKey: zone}
	g := demoHandler([]any{grid, set, svc, newNode("n1", map[string]string{zone: "east"}, ""), newPod(set, 0, "n1", "10.3.0.1")})
	g.Node = "n1"
	name := "web-0.websvc.default.svc.cluster.local."
	run(t, g, "", []test.Case{{Qname: name, Qtype: dns.TypeA, Answer: []dns.RR{test.A(name + "	5	IN	A	10.3.0.1")}}})

	// The same Service without the annotation, as SuperEdge would label it
	// if it accepted prefixed keys: still ours, through the label value.
	delete(svc.Annotations, superedgev1.AnnotationGridUniqKey)
	g.index.Upsert(svc)
	run(t, g, "", []test.Case{{Qname: name, Qtype: dns.TypeA, Answer: []dns.RR{test.A(name + "	5	IN	A	10.3.0.1")}}})
}

// BenchmarkServeDNS is the in-process cost of one unified-name answer.
func BenchmarkServeDNS(b *testing.B) {
	for _, mode := range []string{"node", "clients"} {
		b.Run(mode, func(b *testing.B) {
			g := demoHandler(demoObjects())
			g.Node = "node-1"
			g.Clients = mode == "clients"
			w := &test.ResponseWriter{RemoteIP: "10.1.2.2"}
			m := new(dns.Msg).SetQuestion(demoName, dns.TypeA)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				rec := dnstest.NewRecorder(w)
				if _, err := g.ServeDNS(ctx, rec, m); err != nil || len(rec.Msg.Answer) != 1 {
					b.Fatal("no answer")
				}
			}
		})
	}
}

// TestServeAbsentMemberDenialShort: a known grid's unified name with no
// member pod now goes to the next plugin, whose denial comes back kept no
// longer than gridhosts' own TTL (the kubernetes plugin's 30 s would keep a
// replaced pod's name unresolvable that long once it is back); its positive
// answers and the names of unknown grids pass untouched.
func TestServeAbsentMemberDenialShort(t *testing.T) {
	denyNext := func(ttl uint32) plugin.Handler {
		return plugin.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeNameError)
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "cluster.local.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
				Ns: "ns.dns.cluster.local.", Mbox: "hostmaster.cluster.local.", Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: ttl}}
			w.WriteMsg(m)
			return dns.RcodeSuccess, nil
		})
	}
	ask := func(g *GridHosts, name string) *dns.Msg {
		t.Helper()
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := g.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(name, dns.TypeA)); err != nil {
			t.Fatal(err)
		}
		if rec.Msg == nil {
			t.Fatalf("%s: nothing written", name)
		}
		return rec.Msg
	}
	soaTTLs := func(m *dns.Msg) (ttl, minttl uint32) {
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				return soa.Hdr.Ttl, soa.Minttl
			}
		}
		t.Fatalf("no SOA in %v", m)
		return 0, 0
	}
	handler := func(next plugin.Handler) *GridHosts {
		g := demoHandler(demoObjects())
		g.Node = "node-1"
		g.Next = next
		g.Fall = fall.Root
		return g
	}
	absent := "statefulsetgrid-demo-7." + demoSvc + ".default.svc.cluster.local."
	m := ask(handler(denyNext(30)), absent)
	if ttl, minttl := soaTTLs(m); m.Rcode != dns.RcodeNameError || ttl != 5 || minttl != 5 {
		t.Errorf("a known grid's absent member: %s with SOA TTL %d, MINIMUM %d; want the next plugin's NXDOMAIN kept at most 5 s", dns.RcodeToString[m.Rcode], ttl, minttl)
	}
	// A shorter denial than ours stays as short.
	if ttl, minttl := soaTTLs(ask(handler(denyNext(2)), absent)); ttl != 2 || minttl != 2 {
		t.Errorf("a 2 s denial became TTL %d, MINIMUM %d", ttl, minttl)
	}
	// A name of no grid is not ours: the next plugin's denial as it is.
	if ttl, minttl := soaTTLs(ask(handler(denyNext(30)), "nogrid-0."+demoSvc+".default.svc.cluster.local.")); ttl != 30 || minttl != 30 {
		t.Errorf("no grid's name: SOA TTL %d, MINIMUM %d; want the next plugin's 30", ttl, minttl)
	}
	// The next plugin's answer to an absent member passes untouched.
	if m := ask(handler(answerNext(dns.RcodeSuccess)), absent); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Errorf("the next plugin's answer: %v", m)
	}
}
