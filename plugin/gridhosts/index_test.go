package gridhosts

import (
	"context"
	"net/netip"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func plainPod(name, node, ip string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	setPodIPs(p, ip)
	return p
}

// TestClientAddressReuse: an address handed from one pod to another stays
// with the new pod when the old one's delete arrives late.
func TestClientAddressReuse(t *testing.T) {
	x := NewIndex()
	ip := netip.MustParseAddr("10.9.9.9")
	x.Upsert(plainPod("old", "node-1", "10.9.9.9"))
	x.Upsert(plainPod("new", "node-2", "10.9.9.9"))
	// A late update of the old pod is no new claim to the address.
	late := plainPod("old", "node-1", "10.9.9.9")
	late.ResourceVersion = "7"
	x.Upsert(late)
	if n, ok := x.nodeForClient(ip); !ok || n != "node-2" {
		t.Fatalf("after the old pod's late update: %q %v, want node-2", n, ok)
	}
	x.Delete(plainPod("old", "node-1", "10.9.9.9"))
	if n, ok := x.nodeForClient(ip); !ok || n != "node-2" {
		t.Fatalf("got %q %v, want node-2", n, ok)
	}
	x.Delete(cache.DeletedFinalStateUnknown{Key: "default/new", Obj: plainPod("new", "node-2", "10.9.9.9")})
	// handlerFor unwraps tombstones; Delete itself ignores them.
	if _, ok := x.nodeForClient(ip); !ok {
		t.Fatal("Delete of a tombstone must be a no-op")
	}
	handlerFor(x).OnDelete(cache.DeletedFinalStateUnknown{Key: "default/new", Obj: plainPod("new", "node-2", "10.9.9.9")})
	if n, ok := x.nodeForClient(ip); ok {
		t.Fatalf("address still maps to %q after its pod is gone", n)
	}

	// Finished pods give their address up; node InternalIPs follow relabels.
	done := plainPod("job", "node-1", "10.9.9.8")
	done.Status.Phase = corev1.PodSucceeded
	x.Upsert(done)
	if _, ok := x.nodeForClient(netip.MustParseAddr("10.9.9.8")); ok {
		t.Fatal("finished pod's address indexed")
	}
	x.Upsert(newNode("node-1", nil, "10.0.0.1"))
	x.Upsert(newNode("node-1", nil, "10.0.0.5"))
	if _, ok := x.nodeForClient(netip.MustParseAddr("10.0.0.1")); ok {
		t.Fatal("old InternalIP still indexed")
	}
	if n, _ := x.nodeForClient(netip.MustParseAddr("::ffff:10.0.0.5")); n != "node-1" {
		t.Fatalf("v4-mapped InternalIP: %q", n)
	}
}

// TestHandlerSkipsResyncs: equal resourceVersions are not re-applied.
func TestHandlerSkipsResyncs(t *testing.T) {
	x := NewIndex()
	h := handlerFor(x)
	a := newNode("n", map[string]string{"k": "1"}, "")
	a.ResourceVersion = "5"
	h.OnAdd(a, true)
	b := a.DeepCopy()
	b.Labels["k"] = "2" // same RV: a resync, must not be re-indexed
	h.OnUpdate(a, b)
	if x.nodes["n"].Labels["k"] != "1" {
		t.Fatal("resync with an equal resourceVersion was applied")
	}
	b.ResourceVersion = "6"
	h.OnUpdate(a, b)
	if x.nodes["n"].Labels["k"] != "2" {
		t.Fatal("update not applied")
	}
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
