package index

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/internal/fixtures"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tombstone stands for what an informer hands a handler for an object
// deleted while it was away (cache.DeletedFinalStateUnknown): not a type
// the index knows.
type tombstone struct{ Obj any }

func plainPod(name, node, ip string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	fixtures.SetPodIPs(p, ip)
	return p
}

// TestClientAddressReuse: an address handed from one pod to another stays
// with the new pod when the old one's delete arrives late.
func TestClientAddressReuse(t *testing.T) {
	x := New(Options{})
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
	x.Delete(tombstone{plainPod("new", "node-2", "10.9.9.9")})
	// The informers' handler unwraps tombstones; Delete itself ignores
	// what it does not know.
	if _, ok := x.nodeForClient(ip); !ok {
		t.Fatal("Delete of a tombstone must be a no-op")
	}
	x.Delete(plainPod("new", "node-2", "10.9.9.9"))
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
	x.Upsert(fixtures.Node("node-1", nil, "10.0.0.1"))
	x.Upsert(fixtures.Node("node-1", nil, "10.0.0.5"))
	if _, ok := x.nodeForClient(netip.MustParseAddr("10.0.0.1")); ok {
		t.Fatal("old InternalIP still indexed")
	}
	if n, _ := x.nodeForClient(netip.MustParseAddr("::ffff:10.0.0.5")); n != "node-1" {
		t.Fatalf("v4-mapped InternalIP: %q", n)
	}
}

// TestUpsertEventSkipsResyncs: equal resourceVersions are not re-applied.
func TestUpsertEventSkipsResyncs(t *testing.T) {
	x := New(Options{})
	a := fixtures.Node("n", map[string]string{"k": "1"}, "")
	a.ResourceVersion = "5"
	x.UpsertEvent(nil, a, true)
	b := a.DeepCopy()
	b.Labels["k"] = "2" // same RV: a resync, must not be re-indexed
	x.UpsertEvent(a, b, false)
	if x.nodes["n"].Labels["k"] != "1" {
		t.Fatal("resync with an equal resourceVersion was applied")
	}
	b.ResourceVersion = "6"
	x.UpsertEvent(a, b, false)
	if x.nodes["n"].Labels["k"] != "2" {
		t.Fatal("update not applied")
	}
}

// TestGridsFromChildren: in node mode the index holds no StatefulSetGrid;
// a unified name's grid is the one its child of this node's nodeunit
// names (controller name and UID, grid key), and every other check is
// made as with the grid: a child without a controller, or of a key this
// node has no value of, is no grid here; while a grid's key changes, the
// child of the node's value of the new key (not being deleted) decides.
func TestGridsFromChildren(t *testing.T) {
	x := New(Options{NodeMode: true})
	resolves := func(labels map[string]string, name string) string {
		t.Helper()
		x.Upsert(fixtures.Node("asking", labels, ""))
		p := x.Member(&Viewer{Node: "asking"}, &MemberQuery{Namespace: "default", Grid: name, Ordinal: "0", Service: "svc"}).Pod
		if p == nil {
			return ""
		}
		return p.IPs[0].String()
	}
	x.Upsert(fixtures.Service("default", "svc", "zone1", false))
	grid := fixtures.Grid("default", "db", "zone1", "uid-db")
	a := fixtures.Set(grid, "a", "svc", "uid-db-a", 1)
	x.Upsert(a)
	x.Upsert(fixtures.Pod(a, 0, "node-1", "10.0.1.1"))
	if got := resolves(map[string]string{"zone1": "a"}, "db"); got != "10.0.1.1" {
		t.Fatalf("db-0 from its child: %q, want 10.0.1.1", got)
	}
	if got := resolves(map[string]string{"zone1": "b"}, "db"); got != "" {
		t.Fatalf("db-0 in nodeunit b, which has no child: %q, want none", got)
	}
	if g := x.gridOf("default", "nogrid", "", nil); g != nil {
		t.Fatalf("a grid without children: %+v", g)
	}

	// No controller: not a grid's child, no grid.
	orphan := fixtures.Grid("default", "orphan", "zone1", "uid-orphan")
	o := fixtures.Set(orphan, "a", "svc", "uid-orphan-a", 1)
	o.OwnerReferences = nil
	x.Upsert(o)
	x.Upsert(fixtures.Pod(o, 0, "node-1", "10.0.9.1"))
	if got := resolves(map[string]string{"zone1": "a"}, "orphan"); got != "" || x.gridOf("default", "orphan", "", nil) != nil {
		t.Fatalf("a child without a controller answers %q", got)
	}

	// The grid's key moves to zone2 (and its Service's with it): on a node
	// with values of both, the new child (nodeunit c of zone2) decides, the
	// one whose key the Service names; with the Service's key still zone1,
	// the old child does until it is being deleted.
	moved := fixtures.Grid("default", "db", "zone2", "uid-db")
	c := fixtures.Set(moved, "c", "svc", "uid-db-c", 1)
	x.Upsert(c)
	x.Upsert(fixtures.Pod(c, 0, "node-1", "10.0.3.1"))
	both := map[string]string{"zone1": "a", "zone2": "c"}
	if got := resolves(both, "db"); got != "10.0.1.1" {
		t.Fatalf("new child, Service still of zone1: %q, want the old child's pod 10.0.1.1", got)
	}
	x.Upsert(fixtures.Service("default", "svc", "zone2", false))
	if got := resolves(both, "db"); got != "10.0.3.1" {
		t.Fatalf("new child, Service of zone2: %q, want the new child's pod 10.0.3.1", got)
	}
	x.Upsert(fixtures.Service("default", "svc", "zone1", false))
	a.DeletionTimestamp = &metav1.Time{}
	x.Upsert(a)
	if got := resolves(both, "db"); got != "" {
		t.Fatalf("the old child being deleted, Service of zone1: %q, want none (SetTerminating)", got)
	}
	x.Upsert(fixtures.Service("default", "svc", "zone2", false))
	if got := resolves(both, "db"); got != "10.0.3.1" {
		t.Fatalf("the old child being deleted: %q, want the new child's pod 10.0.3.1", got)
	}
	x.Delete(a)
	if got := resolves(map[string]string{"zone1": "a"}, "db"); got != "" {
		t.Fatalf("on a node of the old key only, the old child gone: %q, want none", got)
	}
	x.Delete(c)
	if g := x.gridOf("default", "db", "", nil); g != nil {
		t.Fatalf("every child gone, grid still %+v", g)
	}
}

// TestMemberLongPodKey: a pod whose key is longer than the finder's stack
// buffer (a 63-byte namespace, a 67-byte pod name: 131 bytes) is found as
// any other, and one whose key fills the buffer (128 bytes) too.
func TestMemberLongPodKey(t *testing.T) {
	ns := strings.Repeat("n", 63)
	for _, gridName := range []string{strings.Repeat("g", 62), strings.Repeat("g", 59)} {
		x := New(Options{})
		grid := fixtures.Grid(ns, gridName, "zone1", "uid-grid")
		set := fixtures.Set(grid, "u1", "svc", "uid-set", 1)
		x.Upsert(grid)
		x.Upsert(set)
		x.Upsert(fixtures.Service(ns, "svc", "zone1", false))
		x.Upsert(fixtures.Node("node-1", map[string]string{"zone1": "u1"}, ""))
		x.Upsert(fixtures.Pod(set, 0, "node-1", "10.0.1.1"))
		key := len(ns) + 1 + len(set.Name) + 2
		p := x.Member(&Viewer{Node: "node-1"}, &MemberQuery{Namespace: ns, Grid: gridName, Ordinal: "0", Service: "svc"}).Pod
		if p == nil || p.IPs[0].String() != "10.0.1.1" {
			t.Errorf("pod key of %d bytes: %v, want 10.0.1.1", key, p)
		}
	}
}
