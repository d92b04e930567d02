package watchcache

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/servicegroup/servicegroup/internal/testnet"
)

// servicesView serves a Services store the test fills directly, ready,
// with a request's RequestInfo as the wrapper gives it.
func servicesView(writeTimeout time.Duration) (http.Handler, *Store) {
	st := Services.NewStore(NewClock(1000, nil), LogLimits{Bytes: 4 << 20, MaxLagBytes: 64 << 20})
	ready := NewReady(nil)
	ready.Live()
	v := NewView(ViewConfig{Served: []*Served{{Resource: Services, Store: st}}, Ready: ready,
		Unrouted: http.NotFoundHandler(), WatchWriteTimeout: writeTimeout})
	return WithRequestInfo(v), st
}

// tinyReceiveBufferClient never lets the kernel absorb more than a few KiB
// for it: once it stops reading, the server's writes block as soon as its
// own send buffer is full.
func tinyReceiveBufferClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: testnet.TinyReceiveBufferDialer().DialContext}}
}

// burstBeyondBuffers writes Services whose JSON certainly exceeds the
// server's largest TCP send buffer plus an HTTP/2 stream window, and
// returns how many it wrote.
func burstBeyondBuffers(t *testing.T, st *Store) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	wmem, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 10
	n := (2*wmem+16<<20)/size + 1
	for i := range n {
		st.Set("ns/big", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big",
			Annotations: map[string]string{"fill": strings.Repeat(strconv.Itoa(i%10), size)}}})
	}
	return n
}

// A watch ends at timeoutSeconds, and when its client goes away, even while
// its write is blocked on a client that does not read (the write timeout is
// an hour here), over HTTP/1.1 and HTTP/2.
func TestWatchEndsWhileWriteBlocked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		http2  bool
		cancel bool // end by client cancellation instead of timeoutSeconds
	}{
		{"http1.1 timeoutSeconds", false, false},
		{"http2 timeoutSeconds", true, false},
		{"http2 client cancels", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a server of its own; two cases wait out timeoutSeconds
			h, st := servicesView(time.Hour)
			ts := httptest.NewUnstartedServer(h)
			client := tinyReceiveBufferClient()
			if tc.http2 {
				ts.EnableHTTP2 = true
				ts.StartTLS()
				client = ts.Client()
			} else {
				ts.Start()
			}
			defer ts.Close()
			url := ts.URL + "/api/v1/services?watch=1"
			if !tc.cancel {
				// Longer than the burst takes: under -race on a loaded
				// 2-core machine it took over 5 s (a .ci/run of 71210a0).
				url += "&timeoutSeconds=20"
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if tc.http2 != (resp.ProtoMajor == 2) {
				t.Fatalf("served over %s", resp.Proto)
			}
			n := burstBeyondBuffers(t, st)
			if st.Watchers() != 1 {
				t.Fatal("the watch ended before the burst: the test proves nothing")
			}
			if tc.cancel {
				cancel()
			}
			if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				return st.Watchers() == 0, nil
			}); err != nil {
				t.Fatal("the watch did not end while its write was blocked")
			}
			if tc.cancel {
				return
			}
			// The client gets only part of the burst; the aborted write breaks
			// the stream off (client-go then resumes or relists).
			lines, err := countLines(resp.Body)
			if lines >= n || err == nil {
				t.Fatalf("client read %d of %d events, stream ended with %v", lines, n, err)
			}
		})
	}
}

func countLines(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

// A watch with a selector keeps streaming after events it does not select:
// kube-proxy watches EndpointSlices without headless ones, and once such a
// slice changed, the stream used to wait forever on a nil channel.
func TestWatchSelectorSkipsUnselectedEvents(t *testing.T) {
	h, st := servicesView(30 * time.Second)
	ts := httptest.NewServer(h)
	defer ts.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/api/v1/services?watch=1&labelSelector=pick%3Dyes", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	svc := func(name, pick string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"pick": pick}}}
	}
	st.Set("ns/skipped", svc("skipped", "no"))
	skippedRV := st.clock.Current()
	// Only once the watch has read past the unselected event does the next
	// one test anything.
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		st.mu.RLock()
		defer st.mu.RUnlock()
		for w := range st.watchers {
			if w.cursor.Load() >= skippedRV {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("the watch never read the unselected event")
	}
	st.Set("ns/wanted", svc("wanted", "yes"))
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		if sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, `"name":"wanted"`) || strings.Contains(line, `"name":"skipped"`) {
			t.Fatalf("first event %s, want ADDED of ns/wanted only", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the selected event never arrived after an unselected one")
	}
}
