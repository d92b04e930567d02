package wrapper

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// An invalid annotation, and a bad local endpoint of default/kubernetes, are
// logged when they appear or change, not on every re-filter.
func TestProblemsLoggedOnce(t *testing.T) {
	errors := map[string]int{}
	logger := funcr.New(func(_, args string) {}, funcr.Options{})
	logger = logr.New(&countingSink{LogSink: logger.GetSink(), errors: errors})
	ctx := klog.NewContext(context.Background(), logger)

	c := emptyCaches()
	s := newSyncer("node0", c, benchStores())
	setAnnotation := func(v string) {
		_ = c.Services.Update(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc",
			Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: v}}})
	}
	setLocal := func(port string) {
		_ = c.Endpoints.Update(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes",
			Annotations: map[string]string{superedgev1.AnnotationLocalEndpoint: "127.0.0.1", superedgev1.AnnotationLocalPort: port}}})
	}
	svc, kube := syncKey{namespace: "ns", name: "svc"}, syncKey{namespace: "default", name: "kubernetes"}
	for _, step := range []struct {
		annotation, port string
		want             int // errors logged so far
	}{
		{"not json", "x", 2},
		{"not json", "x", 2},  // unchanged: silent
		{`["a","a"]`, "0", 4}, // changed: logged again
		{`["zone1"]`, "51003", 4},
		{"not json", "x", 6}, // came back: logged again
		{"not json", "x", 6},
	} {
		setAnnotation(step.annotation)
		setLocal(step.port)
		s.sync(ctx, svc)
		s.sync(ctx, kube)
		if n := errors["Serving Service unfiltered"] + errors["Serving default/kubernetes unchanged"]; n != step.want {
			t.Fatalf("after %q / port %q: %d errors logged, want %d (%v)", step.annotation, step.port, n, step.want, errors)
		}
	}
}

type countingSink struct {
	logr.LogSink
	errors map[string]int
}

func (c *countingSink) Error(err error, msg string, kv ...any) { c.errors[msg]++ }

// The served stores share the informer caches' objects (a new top-level
// struct per served object, no deep copy): re-filtering, relabelling and
// deleting must leave every cached object as the informer stored it.
func TestCachedObjectsNeverModified(t *testing.T) {
	// The benchmarks' layout at a hundredth of its size: the check is per
	// object, so 100 Services (5 with an endpoint on the relabelled node) on
	// 50 nodes in 10 nodeunits take every path the 10,000 do.
	c := sizedCluster(100, 50, 5)
	kube := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes",
		Annotations: map[string]string{superedgev1.AnnotationLocalEndpoint: "127.0.0.1", superedgev1.AnnotationLocalPort: "51003"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Name: "https", Port: 443}}}}}
	_ = c.Endpoints.Add(kube)
	_ = c.Services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "plain", Generation: 3}})
	snapshot := func() map[string]any {
		m := map[string]any{}
		for name, idx := range map[string]cache.Indexer{"svc": c.Services, "ep": c.Endpoints, "slice": c.EndpointSlices} {
			for _, o := range idx.List() {
				k, _ := cache.MetaNamespaceKeyFunc(o)
				m[name+"/"+k] = o.(runtime.Object).DeepCopyObject()
			}
		}
		return m
	}
	before := snapshot()
	s := newSyncer("n0", c, benchStores())
	ctx := context.Background()
	s.syncAll(ctx)
	_ = c.Nodes.Update(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hot", Labels: map[string]string{"zone1": "u1"}}})
	for _, k := range s.affectedByNode("hot", map[string]string{"zone1": "u0"}, map[string]string{"zone1": "u1"}, false) {
		s.sync(ctx, k)
	}
	_ = c.Services.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "plain"}})
	s.sync(ctx, syncKey{namespace: "bench", name: "plain"})
	delete(before, "svc/bench/plain")
	after := snapshot()
	if len(after) != len(before) {
		t.Fatalf("%d cached objects, had %d", len(after), len(before))
	}
	for k, o := range before {
		if !apiequality.Semantic.DeepEqual(o, after[k]) {
			t.Fatalf("cached %s was modified:\n%v\n%v", k, o, after[k])
		}
	}
	// Served objects carry the wrapper's resourceVersions, cached ones not.
	served, _ := s.stores.Services.Get("bench/s0")
	cached, _, _ := c.Services.GetByKey("bench/s0")
	if served.GetResourceVersion() == "" || cached.(*corev1.Service).ResourceVersion != "" {
		t.Fatalf("served RV %q, cached RV %q", served.GetResourceVersion(), cached.(*corev1.Service).ResourceVersion)
	}
}

// Every node's labels come from a metadata-only informer: the syncer
// filters by the labels of PartialObjectMetadata, slimmed by slimNodeMeta.
func TestTopologyFromNodeMetadata(t *testing.T) {
	c := emptyCaches()
	for name, unit := range map[string]string{"node0": "u1", "node1": "u2"} {
		m, err := slimNodeMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"zone1": unit}, Annotations: map[string]string{"big": "dropped"}}})
		if err != nil {
			t.Fatal(err)
		}
		if a := m.(*metav1.PartialObjectMetadata).Annotations; a != nil {
			t.Fatalf("slimNodeMeta kept annotations %v", a)
		}
		_ = c.Nodes.Add(m)
	}
	_ = c.Services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc",
		Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: `["zone1"]`}}})
	n0, n1 := "node0", "node1"
	_ = c.EndpointSlices.Add(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc-a", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
		Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: &n0}, {Addresses: []string{"10.0.0.2"}, NodeName: &n1}},
	})
	s := newSyncer("node0", c, benchStores())
	s.syncAll(context.Background())
	o, ok := s.stores.EndpointSlices.Get("ns/svc-a")
	if eps := o.(*discoveryv1.EndpointSlice).Endpoints; !ok || len(eps) != 1 || eps[0].Addresses[0] != "10.0.0.1" {
		t.Fatalf("served %v", o)
	}
}

// An on-demand fetch that syncs before start-up's own re-filter (upstream
// back after an outage, this node's labels not yet listed) serves nothing:
// it would serve the Service without its endpoints, then with them.
func TestNoRefilterBeforeStartServing(t *testing.T) {
	c := emptyCaches()
	_ = c.Services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc",
		Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: `["zone1"]`}}})
	n0 := "node0"
	slice := func(name string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
			Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: &n0}},
		}
	}
	_ = c.EndpointSlices.Add(slice("svc-a"))
	s := newSyncer("node0", c, benchStores())
	ctx := context.Background()
	s.refilterAll(ctx)
	if o, ok := s.stores.EndpointSlices.Get("ns/svc-a"); ok {
		t.Fatalf("served before start-up's re-filter: %v", o)
	}
	_ = c.Nodes.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "node0", Labels: map[string]string{"zone1": "u1"}}})
	s.startServing(ctx)
	_ = c.EndpointSlices.Add(slice("svc-b"))
	s.refilterAll(ctx)
	for _, k := range []string{"ns/svc-a", "ns/svc-b"} {
		o, ok := s.stores.EndpointSlices.Get(k)
		if !ok || len(o.(*discoveryv1.EndpointSlice).Endpoints) != 1 {
			t.Fatalf("%s served %v (%v)", k, o, ok)
		}
	}
}

// With node-restricted topology keys required, a Service's forgeable keys
// are logged when they appear or change, not on every re-filter.
func TestForgeableKeysLoggedOnce(t *testing.T) {
	infos := map[string]int{}
	logger := funcr.New(func(_, args string) {}, funcr.Options{})
	logger = logr.New(&infoCountingSink{LogSink: logger.GetSink(), infos: infos})
	ctx := klog.NewContext(context.Background(), logger)
	c := emptyCaches()
	s := newSyncer("node0", c, benchStores())
	s.restrictedKeys = true
	svc := syncKey{namespace: "ns", name: "svc"}
	for _, step := range []struct {
		annotation string
		want       int
	}{
		{`["zone1"]`, 1},
		{`["zone1"]`, 1}, // unchanged: silent
		{`["zone1","*"]`, 1},
		{`["zone1","zone2"]`, 2}, // other keys: logged
		{`["node-restriction.kubernetes.io/zone"]`, 2},
		{`["zone1","zone2"]`, 3}, // came back: logged again
	} {
		_ = c.Services.Update(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc",
			Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: step.annotation}}})
		s.sync(ctx, svc)
		if n := infos["Ignoring topology keys a node can set on itself"]; n != step.want {
			t.Fatalf("after %q: logged %d times, want %d", step.annotation, n, step.want)
		}
		if !s.topologyServices.Has("ns/svc") {
			t.Fatalf("after %q: the Service is no longer filtered", step.annotation)
		}
	}
}

type infoCountingSink struct {
	logr.LogSink
	infos map[string]int
}

func (c *infoCountingSink) Info(level int, msg string, kv ...any) { c.infos[msg]++ }

// A Service or EndpointSlice change is re-filtered on the handler's
// goroutine while the syncer is idle, and queued while it is starting,
// busy or has keys queued; either way it is served.
func TestHandlersRefilterWhileIdle(t *testing.T) {
	c := emptyCaches()
	_ = c.Nodes.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "node0", Labels: map[string]string{"zone1": "u1"}}})
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc",
		Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: `["zone1"]`}}}
	_ = c.Services.Add(svc)
	n0 := "node0"
	slice := func(name string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
			Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: &n0}},
		}
	}
	s := newSyncer("node0", c, benchStores())
	handler := s.sliceHandler()
	ctx := context.Background()
	add := func(name string) {
		sl := slice(name)
		_ = c.EndpointSlices.Add(sl)
		handler.OnAdd(sl, false)
	}
	served := func(name string) bool {
		_, ok := s.stores.EndpointSlices.Get("ns/" + name)
		return ok
	}
	drain := func() {
		for s.queue.Len() > 0 {
			s.processNext(ctx)
		}
	}

	add("a") // before start-up's re-filter: queued
	if served("a") || s.queue.Len() != 1 {
		t.Fatalf("before start-up: served %v, %d queued", served("a"), s.queue.Len())
	}
	s.startServing(ctx)
	add("b") // the Service's key is still queued: merged with it
	if served("b") || s.queue.Len() != 1 {
		t.Fatalf("with a key queued: served %v, %d queued", served("b"), s.queue.Len())
	}
	drain()
	if !served("a") || !served("b") {
		t.Fatalf("after the queue: a served %v, b served %v", served("a"), served("b"))
	}

	add("c") // idle: served before the handler returns
	if !served("c") || s.queue.Len() != 0 {
		t.Fatalf("idle: served %v, %d queued", served("c"), s.queue.Len())
	}

	s.mu.Lock() // a re-filter running
	add("d")
	if s.queue.Len() != 1 {
		t.Fatalf("busy: %d queued, want 1", s.queue.Len())
	}
	s.mu.Unlock()
	if served("d") {
		t.Fatal("busy: served before the queue ran")
	}
	drain()
	if !served("d") {
		t.Fatal("busy: not served after the queue ran")
	}

	// The Service handler alike: a relabelled Service is served at once.
	relabelled := svc.DeepCopy()
	relabelled.Labels = map[string]string{"tier": "x"}
	_ = c.Services.Update(relabelled)
	s.serviceHandler().OnUpdate(svc, relabelled)
	if o, ok := s.stores.Services.Get("ns/svc"); !ok || o.GetLabels()["tier"] != "x" {
		t.Fatalf("Service served %v (%v)", o, ok)
	}
}
