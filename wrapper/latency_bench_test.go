package wrapper_test

import (
	"fmt"
	"io"
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

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// BenchmarkWatchLatency measures, in the same run, how long a Service change
// takes to reach a protobuf watch on the apiserver directly and one through
// the wrapper, and reports p50/p99 of both and of the difference.
func BenchmarkWatchLatency(b *testing.B) {
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
	ctx := b.Context()

	open := func(c kubernetes.Interface) watch.Interface {
		list, err := c.CoreV1().Services("latency").List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		wi, err := c.CoreV1().Services("latency").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(wi.Stop)
		return wi
	}
	direct := open(kubernetes.NewForConfigOrDie(withProtobuf(cp.Config)))
	via := open(clientFor(b, w.URL(), protobuf))
	wait := func(wi watch.Interface, want string) time.Time {
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-wi.ResultChan():
				if s, ok := ev.Object.(*corev1.Service); ok && s.Labels["seq"] == want {
					return time.Now()
				}
			case <-timeout:
				b.Fatalf("no event for seq=%s", want)
			}
		}
	}
	var d, v, added []time.Duration
	b.ResetTimer()
	for i := range b.N {
		seq := fmt.Sprint(i)
		start := time.Now()
		if _, err := admin.CoreV1().Services("latency").Patch(ctx, "svc", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"labels":{"seq":%q}}}`, seq)), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		td, tv := wait(direct, seq), wait(via, seq)
		d, v, added = append(d, td.Sub(start)), append(v, tv.Sub(start)), append(added, tv.Sub(td))
	}
	b.StopTimer()
	pct := func(xs []time.Duration, p float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return float64(s[int(float64(len(s)-1)*p)].Microseconds())
	}
	b.ReportMetric(pct(d, .5), "direct-p50-µs")
	b.ReportMetric(pct(d, .99), "direct-p99-µs")
	b.ReportMetric(pct(v, .5), "wrapper-p50-µs")
	b.ReportMetric(pct(v, .99), "wrapper-p99-µs")
	b.ReportMetric(pct(added, .5), "added-p50-µs")
	b.ReportMetric(pct(added, .99), "added-p99-µs")
}

func withProtobuf(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.ContentType = protobuf
	c.AcceptContentTypes = protobuf + ",application/json"
	return c
}
