package gridhosts

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	_ "github.com/coredns/coredns/plugin/hosts" // registers the hosts setup
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	"k8s.io/apimachinery/pkg/types"
)

// handlerBenchNames is how many unified names the handler benchmark serves.
const handlerBenchNames = 1000

// handlerPair builds, in this process, gridhosts and the hosts plugin (its
// own setup, inline entries) answering the same n unified names.
func handlerPair(tb testing.TB, n int) (grid, hosts plugin.Handler, names []string) {
	return handlerPairMode(tb, n, false)
}

// handlerPairMode is handlerPair with gridhosts in node mode when nodeMode
// (grids read from their children, as Corefile.node runs it), with as many
// pods of the grid in another nodeunit, whose child it holds too.
func handlerPairMode(tb testing.TB, n int, nodeMode bool) (grid, hosts plugin.Handler, names []string) {
	tb.Helper()
	g := New([]string{"cluster.local."})
	g.Node = "node-1"
	g.index = index.New(index.Options{NodeMode: nodeMode})
	gr := newGrid("default", "statefulsetgrid-demo", "zone1", "ssg-uid")
	set := newSet(gr, "nodeunit1", demoSvc, types.UID("set-uid"), int32(n))
	objs := []any{gr, set, newService("default", demoSvc, "zone1", false),
		newNode("node-1", map[string]string{"zone1": "nodeunit1"}, "10.0.0.1")}
	if nodeMode {
		other := newSet(gr, "nodeunit2", demoSvc, types.UID("set-uid-2"), int32(n))
		objs = append(objs, other, newNode("node-2", map[string]string{"zone1": "nodeunit2"}, "10.0.0.2"))
		for i := range n {
			objs = append(objs, newPod(other, i, "node-2", fmt.Sprintf("10.2.%d.%d", i/250%256, i%250+1)))
		}
	}
	var inline strings.Builder
	for i := range n {
		ip := fmt.Sprintf("10.1.%d.%d", i/250%256, i%250+1)
		objs = append(objs, newPod(set, i, "node-1", ip))
		name := fmt.Sprintf("statefulsetgrid-demo-%d.%s.default.svc.cluster.local.", i, demoSvc)
		names = append(names, name)
		fmt.Fprintf(&inline, "    %s %s\n", ip, name)
	}
	for _, o := range objs {
		g.index.Upsert(o)
	}
	g.synced.Store(true)

	c := caddy.NewTestController("dns", "hosts /dev/null cluster.local {\n    ttl 5\n    reload 0\n"+inline.String()+"  }")
	setup, err := caddy.DirectiveAction("dns", "hosts")
	if err != nil {
		tb.Fatal(err)
	}
	if err := setup(c); err != nil {
		tb.Fatal(err)
	}
	return g, dnsserver.GetConfig(c).Plugin[0](nil), names
}

// TestHandlerPairAgree: the handler benchmark compares equal answers, in
// both modes.
func TestHandlerPairAgree(t *testing.T) {
	for _, nodeMode := range []bool{false, true} {
		g, h, names := handlerPairMode(t, 20, nodeMode)
		pairAgree(t, g, h, names)
	}
}

func pairAgree(t *testing.T, g, h plugin.Handler, names []string) {
	w := &test.ResponseWriter{}
	for _, name := range names {
		m := new(dns.Msg).SetQuestion(name, dns.TypeA)
		var got [2]string
		for i, hd := range []plugin.Handler{g, h} {
			rec := dnstest.NewRecorder(w)
			if _, err := hd.ServeDNS(context.Background(), rec, m); err != nil || rec.Msg == nil || len(rec.Msg.Answer) != 1 {
				t.Fatalf("%s: no single answer for %s: %v", hd.Name(), name, rec.Msg)
			}
			got[i] = rec.Msg.Answer[0].String()
		}
		if got[0] != got[1] {
			t.Fatalf("%s: gridhosts %q, hosts %q", name, got[0], got[1])
		}
	}
}

// BenchmarkHandler is the in-process cost of one A answer over 1k unified
// names, gridhosts against the hosts plugin with the same names. Compare
// allocs/op and B/op (load-independent); ns/op only within one run.
func BenchmarkHandler(b *testing.B) {
	g, h, names := handlerPair(b, handlerBenchNames)
	msgs := make([]*dns.Msg, len(names))
	for i, n := range names {
		msgs[i] = new(dns.Msg).SetQuestion(n, dns.TypeA)
	}
	w := &test.ResponseWriter{}
	ctx := context.Background()
	for _, hd := range []plugin.Handler{g, h} {
		b.Run(hd.Name(), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rec := dnstest.NewRecorder(w)
				if _, err := hd.ServeDNS(ctx, rec, msgs[i%len(msgs)]); err != nil || len(rec.Msg.Answer) != 1 {
					b.Fatal("no answer")
				}
				i++
			}
		})
	}
}

// BenchmarkHandlerModes is BenchmarkHandler at 1,000 and 10,000 names, with
// gridhosts in clients mode's index (StatefulSetGrids watched) and in node
// mode's (grids read from their children, another nodeunit's child and as
// many of its pods held too), beside the hosts plugin. Each query is
// answered on a goroutine of its own, as CoreDNS's server does: an answer
// path that outgrows a new goroutine's stack pays for its growth here. It
// prints the allocation goal (<= 1.0x the hosts plugin's per answer) as
// ratio lines (ratio_bench_test.go).
func BenchmarkHandlerModes(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/gridhosts-qps.md")
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			clients, h, names := handlerPairMode(b, n, false)
			node, _, _ := handlerPairMode(b, n, true)
			msgs := make([]*dns.Msg, len(names))
			for i, name := range names {
				msgs[i] = new(dns.Msg).SetQuestion(name, dns.TypeA)
			}
			for _, tc := range []struct {
				name string
				hd   plugin.Handler
			}{{"gridhosts-clients", clients}, {"gridhosts-node", node}, {"hosts", h}} {
				b.Run(tc.name, func(b *testing.B) {
					benchRec.PerOp(b)
					w := &test.ResponseWriter{}
					ctx := context.Background()
					done := make(chan bool)
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						m := msgs[i%len(msgs)]
						go func() {
							rec := dnstest.NewRecorder(w)
							_, err := tc.hd.ServeDNS(ctx, rec, m)
							done <- err == nil && rec.Msg != nil && len(rec.Msg.Answer) == 1
						}()
						if !<-done {
							b.Fatal("no answer")
						}
						i++
					}
				})
			}
			// The allocation goal, per answer on its own goroutine as above,
			// each plugin over every name once.
			// (testing.AllocsPerRun rounds down to whole allocations.)
			perAnswer := func(hd plugin.Handler) float64 {
				w, ctx, done := &test.ResponseWriter{}, context.Background(), make(chan bool)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for _, m := range msgs {
					go func() {
						rec := dnstest.NewRecorder(w)
						_, err := hd.ServeDNS(ctx, rec, m)
						done <- err == nil && rec.Msg != nil && len(rec.Msg.Answer) == 1
					}()
					if !<-done {
						b.Fatal("no answer")
					}
				}
				runtime.ReadMemStats(&after)
				return float64(after.Mallocs-before.Mallocs) / float64(len(msgs))
			}
			hostsAllocs := perAnswer(h)
			for _, tc := range []struct {
				mode string
				hd   plugin.Handler
			}{{"clients", clients}, {"node", node}} {
				a := perAnswer(tc.hd)
				line := ratioLine{Name: fmt.Sprintf("gridhosts-allocs-%s-%s", tc.mode, sizeName(n)), Value: a / hostsAllocs, Goal: "<=1.0",
					Extra: []string{fmt.Sprintf("gridhosts-allocs=%.2f", a), fmt.Sprintf("hosts-allocs=%.2f", hostsAllocs)}}
				printRatio(b, line)
				benchRec.Figure(line.Name, line.Value, "x hosts (goal "+line.Goal+")")
			}
		})
	}
}
