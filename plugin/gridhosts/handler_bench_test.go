package gridhosts

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	_ "github.com/coredns/coredns/plugin/hosts" // registers the hosts setup
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/types"
)

// handlerBenchNames is how many unified names the handler benchmark serves.
const handlerBenchNames = 1000

// handlerPair builds, in this process, gridhosts and the hosts plugin (its
// own setup, inline entries) answering the same n unified names.
func handlerPair(tb testing.TB, n int) (grid, hosts plugin.Handler, names []string) {
	tb.Helper()
	g := New([]string{"cluster.local."})
	g.Node = "node-1"
	gr := newGrid("default", "statefulsetgrid-demo", "zone1", "ssg-uid")
	set := newSet(gr, "nodeunit1", demoSvc, types.UID("set-uid"), int32(n))
	objs := []any{gr, set, newService("default", demoSvc, "zone1", false),
		newNode("node-1", map[string]string{"zone1": "nodeunit1"}, "10.0.0.1")}
	var inline strings.Builder
	for i := range n {
		ip := fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
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

// TestHandlerPairAgree: the handler benchmark compares equal answers.
func TestHandlerPairAgree(t *testing.T) {
	g, h, names := handlerPair(t, 20)
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
