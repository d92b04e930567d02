package snapshot

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	testNode     = "node0"
	testUpstream = "https://127.0.0.1:6443"
)

// The tests' kinds: Services (namespaced) and this node's Node, both
// required, as the wrapper's are.
var (
	servicesKind = Kind{Name: "services", GroupVersion: corev1.SchemeGroupVersion, Namespaced: true,
		NewList: func(objs []Object, rv string) runtime.Object {
			return &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: items[corev1.Service](objs)}
		}}
	nodesKind = Kind{Name: "nodes", GroupVersion: corev1.SchemeGroupVersion, OwnNodeOnly: true,
		NewList: func(objs []Object, rv string) runtime.Object {
			return &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: items[corev1.Node](objs)}
		}}
	testKinds = []Kind{servicesKind, nodesKind}
)

// items are objs, each a *T, as a list's Items.
func items[T any](objs []Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		out = append(out, *any(o).(*T))
	}
	return out
}

// testState stands for the wrapper's stores: objects by kind and key, and
// each kind's last change, on one clock.
type testState struct {
	mu    sync.Mutex
	clock uint64
	objs  map[string]map[string]Object
	from  map[string]uint64
}

func (s *testState) Current() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock
}

// set serves o under key at the next version.
func (s *testState) set(kind, key string, o Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	o.SetResourceVersion(strconv.FormatUint(s.clock, 10))
	s.objs[kind][key] = o
	s.from[kind] = s.clock
}

func (s *testState) source(k Kind) Source {
	return Source{Kind: k, State: func() ([]Object, uint64, uint64) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []Object
		for _, key := range slices.Sorted(maps.Keys(s.objs[k.Name])) {
			out = append(out, s.objs[k.Name][key])
		}
		return out, s.from[k.Name], s.clock
	}}
}

func testMetrics() Metrics {
	return Metrics{
		Writes:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writes"}, []string{"result"}),
		Bytes:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "bytes"}),
		WriteSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "seconds"}),
		Refused:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"reason"}),
	}
}

// newTestPersister is a persister of an empty state at clock start.
func newTestPersister(dir string, start uint64) (*Persister, *testState) {
	st := &testState{clock: start, objs: map[string]map[string]Object{}, from: map[string]uint64{}}
	p := &Persister{Dir: dir, Node: testNode, Upstream: testUpstream, Codec: NewCodec(testKinds),
		Clock: st, Metrics: testMetrics()}
	for _, k := range testKinds {
		st.objs[k.Name], st.from[k.Name] = map[string]Object{}, start
		p.Sources = append(p.Sources, st.source(k))
	}
	return p, st
}

func testService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"a": "b"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Port: 80}}}}
}

// fill serves a Service and this node.
func fill(st *testState) {
	st.set("services", "ns/svc", testService("svc"))
	st.set("nodes", testNode, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{"zone1": "u1"}}})
}

// lineLogger collects every log line (any verbosity) with its key/values.
type lineLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLogger) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 10})
}

func (l *lineLogger) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}
