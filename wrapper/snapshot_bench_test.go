package wrapper

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/internal/statefile"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// snapshotBenchState serves 10,000 Services, each with one EndpointSlice
// and one Endpoints of 10 endpoints (100,000 endpoints in slices, as many
// in Endpoints), unfiltered, plus this node.
func snapshotBenchState(dir string) *persister {
	p := newTestPersister(dir, 1000)
	port, proto := int32(80), corev1.ProtocolTCP
	for i := range benchServices {
		name := fmt.Sprintf("s%d", i)
		p.store(watchcache.ResourceServices).Set("bench/"+name, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/256, i%256), Ports: []corev1.ServicePort{{Port: 80, Protocol: proto}}}})
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
		}
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80, Protocol: proto}}}}}
		for j := range benchEndpoints {
			node := fmt.Sprintf("n%d", (i*benchEndpoints+j)%benchNodes)
			ip := fmt.Sprintf("10.%d.%d.%d", j, i/256, i%256)
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node})
			ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: ip, NodeName: &node})
		}
		p.store(watchcache.ResourceEndpointSlices).Set("bench/"+sl.Name, sl)
		p.store(watchcache.ResourceEndpoints).Set("bench/"+name, ep)
	}
	p.store(watchcache.ResourceNodes).Set(testNode, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{"zone1": "u0"}}})
	return p
}

// jsonLists encodes every store as a plain JSON List (the baseline: what a
// naive cache would write).
func jsonLists(p *persister, w *bytes.Buffer) error {
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	for _, r := range p.resources {
		objs, _, at := r.Store.SnapshotState()
		if err := codecs.LegacyCodec(r.GroupVersion).Encode(r.NewList(objs, fmt.Sprint(at)), w); err != nil {
			return err
		}
	}
	return nil
}

// cpuTime is the process's user+system CPU time: on a shared, loaded
// machine it says more about the cost than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSnapshot measures, at 10,000 Services / 100,000 endpoints, the
// cost of one snapshot write and the start-up from a snapshot to the first
// served list, each against a baseline in the same run: writing the same
// objects as plain JSON Lists (also fsynced), and decoding those JSON Lists.
// Ratios are reported as snapshot/baseline.
func BenchmarkSnapshot(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/wrapper-snapshot.md")
	dir := b.TempDir()
	p := snapshotBenchState(dir)
	// Upstream is a closed loopback port: the wrapper serves the snapshot.
	up := &rest.Config{Host: "http://127.0.0.1:1"}
	p.Upstream = up.Host
	logger := klog.Background()

	var jsonWrite, jsonDecode time.Duration
	var jsonBytes int
	b.Run("baseline-json-write", func(b *testing.B) {
		benchRec.PerOp(b)
		for b.Loop() {
			var buf bytes.Buffer
			if err := jsonLists(p, &buf); err != nil {
				b.Fatal(err)
			}
			if _, err := statefile.WriteAtomic(dir, "baseline.json", func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
				b.Fatal(err)
			}
			jsonBytes = buf.Len()
		}
		jsonWrite = b.Elapsed() / time.Duration(b.N)
		benchRec.ReportOn(b, float64(jsonBytes), "bytes")
	})
	b.Run("write", func(b *testing.B) {
		benchRec.PerOp(b)
		cpu := cpuTime()
		for b.Loop() {
			p.Write(logger, time.Now())
			if e := p.LastError(); e != "" {
				b.Fatal(e)
			}
		}
		benchRec.ReportOn(b, float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
		st, _ := os.Stat(p.Path())
		per := b.Elapsed() / time.Duration(b.N)
		benchRec.ReportOn(b, float64(st.Size()), "bytes")
		if jsonWrite > 0 {
			benchRec.ReportOn(b, float64(per)/float64(jsonWrite), "x-json-write")
			benchRec.ReportOn(b, float64(st.Size())/float64(jsonBytes), "x-json-bytes")
		}
	})
	b.Run("baseline-json-decode", func(b *testing.B) {
		benchRec.PerOp(b)
		var buf bytes.Buffer
		if err := jsonLists(p, &buf); err != nil {
			b.Fatal(err)
		}
		if _, err := statefile.WriteAtomic(dir, "baseline.json", func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
			b.Fatal(err)
		}
		codecs := serializer.NewCodecFactory(scheme.Scheme)
		dec := codecs.UniversalDeserializer()
		for b.Loop() {
			data, err := os.ReadFile(filepath.Join(dir, "baseline.json"))
			if err != nil {
				b.Fatal(err)
			}
			// The file holds four JSON documents, one per line.
			for _, doc := range bytes.Split(data, []byte("\n")) {
				if len(bytes.TrimSpace(doc)) == 0 {
					continue
				}
				if _, _, err := dec.Decode(doc, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		jsonDecode = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("start-to-first-list", func(b *testing.B) {
		benchRec.PerOp(b)
		p.Write(logger, time.Now())
		cpu := cpuTime()
		for b.Loop() {
			srv, err := New(Options{NodeName: testNode, Upstream: up, StateDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = srv.Run(ctx) }()
			h := srv.Handler()
			giveUp := time.Now().Add(time.Minute)
			for {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/apis/discovery.k8s.io/v1/endpointslices", nil))
				if rec.Code == http.StatusOK {
					if rec.Body.Len() < benchServices*100 {
						b.Fatalf("first list has %d bytes", rec.Body.Len())
					}
					break
				}
				if rec.Code != http.StatusTooManyRequests || time.Now().After(giveUp) {
					b.Fatalf("list: %d %s", rec.Code, rec.Body)
				}
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-done
		}
		// Includes the informers' first failing tries to reach upstream.
		benchRec.ReportOn(b, float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
		if jsonDecode > 0 {
			benchRec.ReportOn(b, float64(b.Elapsed()/time.Duration(b.N))/float64(jsonDecode), "x-json-decode")
		}
	})
}
