package gridhosts

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/types"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// answerWorld is gridhosts (clients or node mode) over grids grids, each
// with a child in each of units nodeunits (u0 is node-1's, where the client
// pod 10.9.0.1 runs) holding pods pods.
func answerWorld(tb testing.TB, clients bool, grids, units, pods int) *GridHosts {
	tb.Helper()
	g := New([]string{"cluster.local."})
	g.Node = "node-1"
	g.Clients = clients
	g.index = index.New(index.Options{NodeMode: !clients})
	for u := range units {
		g.index.Upsert(newNode(fmt.Sprintf("node-%d", u+1), map[string]string{"zone1": fmt.Sprintf("u%d", u)}, fmt.Sprintf("10.0.%d.%d", u/250, u%250+1)))
	}
	for gi := range grids {
		name, svc := fmt.Sprintf("g%04d", gi), fmt.Sprintf("s%04d", gi)
		gr := newGrid("default", name, "zone1", types.UID("uid-"+name))
		g.index.Upsert(gr)
		g.index.Upsert(newService("default", svc, "zone1", false))
		for u := range units {
			set := newSet(gr, fmt.Sprintf("u%d", u), svc, types.UID(fmt.Sprintf("uid-%s-%d", name, u)), int32(pods))
			g.index.Upsert(set)
			for p := range pods {
				// Distinct addresses: 16 bits of pod number under 10.0.0.0/8's
				// second octet per nodeunit.
				n := (gi*pods + p) % 65000
				g.index.Upsert(newPod(set, p, fmt.Sprintf("node-%d", u+1), fmt.Sprintf("10.%d.%d.%d", 10+u%200, n/250, n%250+1)))
			}
		}
	}
	client := newPod(newSet(newGrid("default", "client", "zone1", "uid-client"), "u0", "client", "uid-client-set", 1), 0, "node-1", "10.9.0.1")
	g.index.Upsert(client)
	g.synced.Store(true)
	return g
}

// TestAnswerAllocsConstantWithTheWorld: an answer allocates the same (count
// and bytes) over 10 grids of 2 nodeunits with 2 pods each as over 1,000
// grids of 6 nodeunits with 4 pods each, in both modes, for an answered name
// and for one that is not (a pod beyond the replicas): nothing on the answer
// path is sized by the number of grids, children or pods (issue 49).
func TestAnswerAllocsConstantWithTheWorld(t *testing.T) {
	measure := func(g *GridHosts, name string, wantA string) answerCost {
		w := &test.ResponseWriter{RemoteIP: "10.9.0.1"}
		m := new(dns.Msg).SetQuestion(name, dns.TypeA)
		ctx := context.Background()
		serve := func() {
			rec := dnstest.NewRecorder(w)
			if _, err := g.ServeDNS(ctx, rec, m); err != nil || rec.Msg == nil {
				t.Fatalf("%s: no answer: %v", name, err)
			}
			got := ""
			if len(rec.Msg.Answer) == 1 {
				got = rec.Msg.Answer[0].(*dns.A).A.String()
			}
			if got != wantA {
				t.Fatalf("%s: answered %q (rcode %s), want %q", name, got, dns.RcodeToString[rec.Msg.Rcode], wantA)
			}
		}
		serve() // first-use costs (the metrics' label lookups) out of the count
		// Other goroutines (the runtime's, the test framework's) can
		// only add to the process's counts: the least of a few rounds is
		// the answer's own.
		const runs, rounds = 200, 5
		allocs, bytes := math.Inf(1), math.Inf(1)
		for range rounds {
			allocs = min(allocs, testing.AllocsPerRun(runs, serve))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				serve()
			}
			runtime.ReadMemStats(&after)
			bytes = min(bytes, float64(after.TotalAlloc-before.TotalAlloc)/runs)
		}
		return answerCost{allocs, bytes}
	}
	for _, clients := range []bool{false, true} {
		mode := map[bool]string{false: "node", true: "clients"}[clients]
		small := answerWorld(t, clients, 10, 2, 2)
		large := answerWorld(t, clients, 1000, 6, 4)
		for _, q := range []struct{ name, wantA string }{
			{"g0000-1.s0000.default.svc.cluster.local.", "10.10.0.2"},
			{"g0000-3.s0000.default.svc.cluster.local.", ""}, // small world: beyond 2 replicas
		} {
			if q.wantA == "" {
				// In the large world ordinal 3 exists: ask one beyond its 4.
				s := measure(small, q.name, "")
				l := measure(large, "g0000-7.s0000.default.svc.cluster.local.", "")
				check(t, mode, "not answered", s, l)
				continue
			}
			wantLarge := "10.10.0.2"
			check(t, mode, "answered", measure(small, q.name, q.wantA), measure(large, q.name, wantLarge))
		}
	}
}

// answerCost is one answer's allocations and bytes allocated.
type answerCost struct{ allocs, bytes float64 }

func check(t *testing.T, mode, what string, s, l answerCost) {
	t.Helper()
	t.Logf("%s mode, %s: %.1f allocs %.0f B per answer at 10 grids, %.1f allocs %.0f B at 1,000", mode, what, s.allocs, s.bytes, l.allocs, l.bytes)
	if l.allocs != s.allocs || l.bytes > s.bytes {
		t.Errorf("%s mode, %s: %.1f allocs %.0f B per answer at 1,000 grids, %.1f allocs %.0f B at 10: the answer path grows with the world",
			mode, what, l.allocs, l.bytes, s.allocs, s.bytes)
	}
}

// stackSink keeps burn's frames from being optimised away.
var stackSink byte

// burn uses depth frames of stack (each about 100 bytes) below f.
//
//go:noinline
func burn(depth int, f func()) {
	var pad [64]byte
	pad[depth&63] = byte(depth)
	if depth <= 0 {
		f()
	} else {
		burn(depth-1, f)
	}
	stackSink += pad[(depth*7)&63]
}

// preGrow is burn's depth that grows a fresh goroutine's stack to 8 KiB
// (more than 4 KiB of frames, less than 8).
const preGrow = 45

// stackRoom is how many of burn's frames fit below one answer of hd on a
// fresh goroutine before its stack must grow: the goroutine's stack moves
// when it grows, so a local's address before and after tells. Garbage
// collection is off meanwhile (it may shrink stacks) and every goroutine
// starts at the same size (the test runs in a child process without the
// runtime's adaptive starting size), grown to the same size first.
func stackRoom(t *testing.T, hd plugin.Handler, m *dns.Msg) int {
	grows := func(depth int) bool {
		for range 5 { // the same depth may or may not grow (map probes, locks): any time counts
			if growsOnce(t, hd, m, depth) {
				return true
			}
		}
		return false
	}
	if grows(0) {
		t.Fatalf("%s: an answer alone outgrows the probe's stack: the probe compares nothing", hd.Name())
	}
	for depth := 1; depth < 400; depth++ {
		if grows(depth) {
			return depth
		}
	}
	t.Fatalf("%s: 400 frames and an answer never grew the goroutine's stack: the probe measures nothing", hd.Name())
	return 0
}

// TestAnswerStackNoDeeperThanHosts: a query answered on a fresh goroutine
// (as CoreDNS's server answers each) leaves at least as much of its stack
// unused with gridhosts as with the hosts plugin answering the same names,
// in node and clients mode: gridhosts does not make the server grow a
// query's stack where hosts does not (issue 49's profile: 19% of CPU in
// stack growth from gridhosts' answer path).
func TestAnswerStackNoDeeperThanHosts(t *testing.T) {
	if os.Getenv("GRIDHOSTS_STACK_PROBE") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAnswerStackNoDeeperThanHosts$", "-test.v")
		cmd.Env = append(os.Environ(), "GRIDHOSTS_STACK_PROBE=1", "GODEBUG=adaptivestackstart=0")
		out, err := cmd.CombinedOutput()
		t.Logf("child process:\n%s", out)
		if err != nil {
			t.Fatalf("stack probe: %v", err)
		}
		return
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, nodeMode := range []bool{false, true} {
		g, h, names := handlerPairMode(t, 1000, nodeMode)
		m := new(dns.Msg).SetQuestion(names[500], dns.TypeA)
		runtime.GC()
		gridRoom, hostsRoom := stackRoom(t, g, m), stackRoom(t, h, m)
		t.Logf("node mode %v: a fresh goroutine's stack grows after %d frames below a gridhosts answer, %d below a hosts answer", nodeMode, gridRoom, hostsRoom)
		if gridRoom < hostsRoom {
			t.Errorf("node mode %v: gridhosts' answer needs more stack than the hosts plugin's (room for %d frames, hosts %d)", nodeMode, gridRoom, hostsRoom)
		}
	}
}

// packingWriter packs the answer as miekg/dns's server does before it
// writes it: that is on the stack of every answer too.
type packingWriter struct{ test.ResponseWriter }

func (w *packingWriter) WriteMsg(m *dns.Msg) error {
	_, err := m.Pack()
	return err
}

// growsOnce answers one query of hd on a fresh goroutine, depth frames of
// burn below it, and reports whether the goroutine's stack grew.
func growsOnce(t *testing.T, hd plugin.Handler, m *dns.Msg, depth int) bool {
	done := make(chan bool)
	go func() {
		// A fresh goroutine's 2 KiB grows under either plugin's answer
		// here (the test's frames are not the server's): the probe
		// starts from a stack grown once to 8 KiB, the same for both.
		burn(preGrow, func() {})
		var marker byte
		before := uintptr(unsafe.Pointer(&marker))
		var rec *dnstest.Recorder
		burn(depth, func() {
			rec = dnstest.NewRecorder(&packingWriter{})
			if _, err := hd.ServeDNS(context.Background(), rec, m); err != nil || rec.Msg == nil || len(rec.Msg.Answer) != 1 {
				t.Errorf("%s: no answer", hd.Name())
			}
		})
		done <- uintptr(unsafe.Pointer(&marker)) != before
	}()
	return <-done
}
