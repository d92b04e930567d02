package wrapper_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
	"github.com/servicegroup/servicegroup/wrapper/internal/latencystages"
)

// BenchmarkWatchLatency measures, in the same run, how long a Service change
// takes to reach a kube-proxy-shaped watch (cluster-wide, kube-proxy's label
// selector) on the apiserver directly and one through the wrapper, in
// protobuf and JSON, and reports p50/p99 of both and of the difference
// ("added"). A second direct watch, the same as the first, is timed against
// the first in the same way ("floor"): what any second watch of the same
// change shows (which of the apiserver's watches is written first, which
// reader gets a CPU first), so the wrapper's own share is "added" above it.
// Each change is timed on all three watches, so they are interleaved event
// by event.
func BenchmarkWatchLatency(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/wrapper-watch-latency.md")
	// Informer logs on stderr would split the benchmark's result line.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	b.Cleanup(func() { klog.LogToStderr(true) })
	cp := controlplane.StartForTest(b, controlplane.Options{})
	admin := adminClient(cp)
	createNodes(b, admin)
	createNamespace(b, admin, "latency")
	createService(b, admin, "latency", "svc", `["zone1"]`)
	w := startWrapper(b, cp, "node0", "", wrapper.Options{})
	// The shipped setup: TLS, where client-go speaks HTTP/2 to the wrapper
	// as it does to the apiserver.
	tlsServer := httptest.NewUnstartedServer(w.srv.Handler())
	tlsServer.EnableHTTP2 = true
	tlsServer.StartTLS()
	b.Cleanup(tlsServer.Close)

	// seq numbers every change across the sub-benchmarks' runs: each patch
	// changes the Service.
	var seq int
	for _, transport := range []string{"http2-tls", "http1-plain"} {
		for _, contentType := range []string{protobuf, jsonType} {
			name := transport + "/" + map[string]string{protobuf: "protobuf", jsonType: "json"}[contentType]
			b.Run(name, func(b *testing.B) {
				through := clientFor(b, w.URL(), contentType)
				if transport == "http2-tls" {
					through = kubernetes.NewForConfigOrDie(&rest.Config{Host: tlsServer.URL, QPS: -1, TLSClientConfig: rest.TLSClientConfig{Insecure: true},
						ContentConfig: rest.ContentConfig{ContentType: contentType, AcceptContentTypes: contentType + ",application/json"}})
				}
				direct := func() kubernetes.Interface {
					return kubernetes.NewForConfigOrDie(withContentType(cp.Config, contentType))
				}
				benchmarkWatchLatency(b, benchRec, &seq, admin, direct(), direct(), through)
			})
		}
	}
}

// benchmarkWatchLatency times each change on direct, on direct2 (an equal
// second watch on the apiserver, the floor) and on through (the wrapper).
func benchmarkWatchLatency(b *testing.B, benchRec *benchrecord.Record, next *int, admin, direct, direct2, through kubernetes.Interface) {
	ctx := b.Context()
	// kube-proxy's Service watch: every namespace, its label selector.
	opts := metav1.ListOptions{LabelSelector: "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"}
	open := func(c kubernetes.Interface) watch.Interface {
		list, err := c.CoreV1().Services("").List(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		o := opts
		o.ResourceVersion, o.AllowWatchBookmarks = list.ResourceVersion, true
		wi, err := c.CoreV1().Services("").Watch(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(wi.Stop)
		return wi
	}
	// Each watch is read all the time by its own goroutine, which stamps an
	// event the moment client-go hands it over: no arrival waits for the
	// patch's response or for the other watch.
	arrivals := func(wi watch.Interface, stage string) <-chan arrival {
		out := make(chan arrival, 16)
		go func() {
			for ev := range wi.ResultChan() {
				if s, ok := ev.Object.(*corev1.Service); ok && s.Labels["seq"] != "" {
					latencystages.StampSeq(s.Labels["seq"], stage)
					out <- arrival{seq: s.Labels["seq"], at: time.Now()}
				}
			}
		}()
		return out
	}
	directArrivals, direct2Arrivals, viaArrivals := arrivals(open(direct), "direct"), arrivals(open(direct2), "direct2"), arrivals(open(through), "via")
	wait := func(from <-chan arrival, want string) time.Time {
		timeout := time.After(10 * time.Second)
		for {
			select {
			case a := <-from:
				if a.seq == want {
					return a.at
				}
			case <-timeout:
				b.Fatalf("no event for seq=%s", want)
			}
		}
	}
	var d, v, added, floor []time.Duration
	b.ResetTimer()
	for range b.N {
		*next++
		seq := fmt.Sprint(*next)
		start := time.Now()
		if _, err := admin.CoreV1().Services("latency").Patch(ctx, "svc", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"labels":{"seq":%q}}}`, seq)), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		td, td2, tv := wait(directArrivals, seq), wait(direct2Arrivals, seq), wait(viaArrivals, seq)
		d, v, added, floor = append(d, td.Sub(start)), append(v, tv.Sub(start)), append(added, tv.Sub(td)), append(floor, td2.Sub(td))
	}
	b.StopTimer()
	// Built with -tags latencystages, the wrapper stamps each change on its
	// way through: the time from one stage to the next, and from the
	// wrapper's upstream read to the client.
	if stages := latencystages.Report([]string{"direct", "reflector", "handler", "sync", "stored", "woke", "encoded", "flushed", "via"}); stages != "" {
		b.Logf("stages over %d changes:\n%s%s", b.N, stages, latencystages.Report([]string{"reflector", "via"}))
	}
	latencystages.Reset()
	pct := func(xs []time.Duration, p float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return float64(s[int(float64(len(s)-1)*p)].Microseconds())
	}
	benchRec.ReportOn(b, pct(d, .5), "direct-p50-µs")
	benchRec.ReportOn(b, pct(d, .99), "direct-p99-µs")
	benchRec.ReportOn(b, pct(v, .5), "wrapper-p50-µs")
	benchRec.ReportOn(b, pct(v, .99), "wrapper-p99-µs")
	benchRec.ReportOn(b, pct(added, .5), "added-p50-µs")
	benchRec.ReportOn(b, pct(added, .99), "added-p99-µs")
	benchRec.ReportOn(b, pct(floor, .5), "floor-p50-µs")
	benchRec.ReportOn(b, pct(floor, .99), "floor-p99-µs")
}

type arrival struct {
	seq string
	at  time.Time
}

func withContentType(c *rest.Config, contentType string) *rest.Config {
	c = rest.CopyConfig(c)
	c.ContentType = contentType
	c.AcceptContentTypes = contentType + ",application/json"
	return c
}
