package wrapper_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/testnet"
	"github.com/servicegroup/servicegroup/wrapper"
)

// heapAfterGC is the live Go heap of this process (the wrapper runs in it).
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestStalledReadersBounded: clients that send a LIST of every Service and
// never read the answer (a 4 KiB receive buffer, no reads) cannot grow the
// wrapper's memory beyond what its in-flight cap allows: only
// MaxRequestsInFlight of them are served at once, each pinning one encoded
// list until its write deadline; the rest get 429 with Retry-After. A client
// that reads is served, by the same client-go a kube-proxy uses.
func TestStalledReadersBounded(t *testing.T) {
	const (
		services    = 400
		stalled     = 48
		maxInFlight = 4
	)
	ns := "stalled"
	cp, admin := startTestCluster(t, ns)
	// Large Services make a large list: 8 KiB of annotation each.
	pad := strings.Repeat("x", 8<<10)
	for i := range services {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc-%d", i), Annotations: map[string]string{"example.com/pad": pad}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if _, err := admin.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const writeTimeout = 30 * time.Second
	w := startWrapper(t, cp, "node0", "", wrapper.Options{MaxRequestsInFlight: maxInFlight, RequestWriteTimeout: writeTimeout})
	eventually(t, "every Service served", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := clientFor(t, w.URL(), "").CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == services, err
	})
	// The size of one answer, as a reading client gets it.
	resp, err := http.Get(w.URL() + "/api/v1/services")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %v", resp.StatusCode, err)
	}
	listBytes := uint64(len(body))
	body = nil
	before := heapAfterGC()

	// Stalled readers: each sends one LIST and never reads.
	startedBefore := w.started.Load()
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	dialer := testnet.TinyReceiveBufferDialer()
	// The stalled requests hold their slots until their write deadline,
	// writeTimeout after they began: what needs them held runs before it.
	stalledAt := time.Now()
	for range stalled {
		c, err := dialer.DialContext(t.Context(), "tcp", w.addr)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		if _, err := fmt.Fprintf(c, "GET /api/v1/services HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every stalled request reached the wrapper", 2*time.Minute, func(context.Context) (bool, error) {
		return w.started.Load()-startedBefore >= stalled, nil
	})

	// A client over the cap is told to come back, clearly.
	var tooMany *http.Response
	eventually(t, "a 429 with Retry-After while the stalled readers hold every slot", 2*time.Minute, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.URL()+"/api/v1/namespaces/default/services/kubernetes", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		tooMany = resp
		if resp.StatusCode != http.StatusTooManyRequests {
			return false, fmt.Errorf("answered %s %s after the stalled requests began (their write deadline: %s)",
				resp.Status, time.Since(stalledAt).Round(time.Millisecond), writeTimeout)
		}
		return true, nil
	})
	if tooMany.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %v", tooMany.Header)
	}

	// Each request served pins its encoded list (JSON encoders grow their
	// buffer by doubling: up to twice the list) plus the list it encodes:
	// allow three lists per request in flight, one more for the runtime's
	// own slack, and 8 MiB besides. Without the cap it is one list or more
	// per stalled reader.
	bound := before + (maxInFlight+1)*3*listBytes + 8<<20
	uncapped := before + stalled*listBytes
	if bound >= uncapped {
		t.Fatalf("test sizes do not tell a cap from none: bound %d, uncapped %d", bound, uncapped)
	}
	// Sample while the stalled requests settle (the encoders finish), and
	// only while they hold their slots, a third of their deadline to spare:
	// on a loaded machine a forced GC of this heap under -race takes seconds.
	peak, samples := heapAfterGC(), 1
	for ; samples < 20 && time.Since(stalledAt) < writeTimeout*2/3; samples++ {
		time.Sleep(100 * time.Millisecond)
		peak = max(peak, heapAfterGC())
	}
	t.Logf("list %d bytes; heap before %d, peak of %d samples with %d stalled readers %d (bound %d, uncapped at least %d)",
		listBytes, before, samples, stalled, peak, bound, uncapped)
	if peak > bound {
		t.Errorf("heap grew to %d bytes with %d stalled readers, want at most %d (%d in flight of a %d-byte list)", peak, stalled, bound, maxInFlight, listBytes)
	}

	// A healthy client (client-go, which honours Retry-After) is served
	// once the stalled answers hit their write deadline.
	healthy := kubernetes.NewForConfigOrDie(&rest.Config{Host: w.URL(), QPS: -1})
	eventually(t, "a reading client served next to the stalled ones", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := healthy.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until served
		}
		return len(l.Items) == services, nil
	})
	if after := heapAfterGC(); after > bound {
		t.Errorf("heap %d after the stalled answers were cut off, want at most %d", after, bound)
	}
}
