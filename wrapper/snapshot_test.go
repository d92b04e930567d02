package wrapper

import (
	"bytes"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/wrapper/snapshot"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// The snapshot's format and persistence are package snapshot's, tested
// there; these tests are of the wrapper's side: its stores' states as
// sections, files written by earlier builds, seeding.

const (
	testNode     = "node0"
	testUpstream = "https://127.0.0.1:6443"
)

// newTestPersister builds stores for every served resource on one clock and
// a persister over them.
func newTestPersister(dir string, start uint64) *persister {
	p := newPersister(dir, testNode, testUpstream, 0)
	p.Clock = watchcache.NewClock(start, nil)
	for _, r := range kubeProxyResources {
		p.addTestStore(r)
	}
	return p
}

// addTestStore adds an empty store of r on p's clock to what p keeps.
func (p *persister) addTestStore(r *watchcache.Resource) {
	p.keep(&watchcache.Served{Resource: r, Store: r.NewStore(p.Clock.(*watchcache.Clock),
		watchcache.LogLimits{Bytes: DefaultEventLogBytes, MaxLagBytes: DefaultWatchMaxLagBytes})})
}

func (p *persister) store(name string) *watchcache.Store {
	for _, r := range p.resources {
		if r.Name == name {
			return r.Store
		}
	}
	panic("no store " + name)
}

func testService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"a": "b"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Port: 80}}}}
}

func testSlice(name string, ips ...string) *discoveryv1.EndpointSlice {
	node := testNode
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, ip := range ips {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node})
	}
	return sl
}

// fill serves one object of each resource.
func fill(p *persister) {
	p.store(watchcache.ResourceServices).Set("ns/svc", testService("svc"))
	p.store(watchcache.ResourceEndpoints).Set("ns/svc", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}}}}})
	p.store(watchcache.ResourceEndpointSlices).Set("ns/svc-1", testSlice("svc-1", "10.1.0.1"))
	p.store(watchcache.ResourceNodes).Set(testNode, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{"zone1": "u1"}}})
}

// TestSnapshotRoundTrip: each store's section is the versions at which
// exactly its objects were served, from its last change (a deletion too)
// to the clock at the write.
func TestSnapshotRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := newTestPersister(dir, 1000)
	fill(p)
	p.store(watchcache.ResourceServices).Set("ns/svc2", testService("svc2"))
	p.store(watchcache.ResourceServices).Delete("ns/svc") // the last change of services is a deletion
	p.Write(logr.Discard(), time.Now())

	sn := newTestPersister(dir, 5000).Load(logr.Discard())
	if sn == nil {
		t.Fatal("snapshot not loaded")
	}
	for _, r := range p.resources {
		objs, from, at := r.Store.SnapshotState()
		if len(sn.Objects[r.Name]) != len(objs) {
			t.Fatalf("%s: %d objects, want %d", r.Name, len(sn.Objects[r.Name]), len(objs))
		}
		if sec := sn.Section(r.Name); sec.At != at || sec.From != from {
			t.Fatalf("%s: section %+v, want from %d at %d", r.Name, sec, from, at)
		}
	}
	// The services section starts at the deletion, not at its newest object (1005).
	if sec := sn.Section(watchcache.ResourceServices); sec.From != 1006 {
		t.Fatalf("services section from %d, want 1006 (the deletion)", sec.From)
	}
}

// TestSnapshotFormatUnchanged: testdata/snapshot-v1.pb, written by the
// wrapper before package snapshot existed (the six sections of kube-proxy's
// and the DNS view's, before ServiceCIDRs'), loads, and writing what it
// holds again gives the same bytes.
func TestSnapshotFormatUnchanged(t *testing.T) {
	golden, err := os.ReadFile("testdata/snapshot-v1.pb")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/snapshot.pb", golden, 0o600); err != nil {
		t.Fatal(err)
	}
	p := newPersister(dir, testNode, testUpstream, 0)
	sn := p.Load(logr.Discard())
	if sn == nil {
		t.Fatal("the earlier build's snapshot not loaded")
	}
	if want := len(kubeProxyResources) + len(dnsSnapshotResources); len(sn.Header.Sections) != want {
		t.Fatalf("%d sections, want %d", len(sn.Header.Sections), want)
	}
	// Write its objects again (in the stores' key order) with its sections.
	kinds := map[string]snapshot.Kind{}
	for _, r := range snapshotResources() {
		kinds[r.Name] = snapshotKind(r)
	}
	again := newPersister(t.TempDir(), testNode, testUpstream, 0)
	again.Clock = watchcache.NewClock(sn.MaxVersion(), nil)
	for _, sec := range sn.Header.Sections {
		objs := sn.Objects[sec.Resource]
		again.Sources = append(again.Sources, snapshot.Source{Kind: kinds[sec.Resource], State: func() ([]watchcache.Object, uint64, uint64) {
			var items []watchcache.Object
			for _, k := range slices.Sorted(maps.Keys(objs)) {
				items = append(items, objs[k])
			}
			return items, sec.From, sec.At
		}})
	}
	again.Write(logr.Discard(), sn.Header.WrittenAt)
	if e := again.LastError(); e != "" {
		t.Fatal(e)
	}
	if b, err := os.ReadFile(again.Path()); err != nil || !bytes.Equal(b, golden) {
		t.Fatalf("rewritten snapshot differs from the earlier build's (%v):\n%q\n%q", err, b, golden)
	}
}
