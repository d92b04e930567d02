package wrapper_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/wrapper"
)

// TestIdleWatchOverHTTP2 serves the wrapper over TLS, where client-go
// speaks HTTP/2 (as kube-proxy does with the shipped kubeconfig), and keeps
// a watch idle for three times the watch write timeout: it must still
// deliver the next event. Over HTTP/2 a write deadline left armed resets
// the stream when it passes even with nothing to write, which cut off every
// idle watcher after the timeout (kube-proxy then relisted).
func TestIdleWatchOverHTTP2(t *testing.T) {
	t.Parallel() // its own control plane
	cp, admin := startTestCluster(t, "")
	srv, err := wrapper.New(wrapper.Options{NodeName: "node0", Upstream: cp.Config, WatchWriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Run(ctx) }()
	var http2Watches atomic.Int32
	handler := srv.Handler()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Query().Get("watch") == "true" && req.ProtoMajor == 2 {
			http2Watches.Add(1)
		}
		handler.ServeHTTP(w, req)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return srv.Ready(), nil
	}); err != nil {
		t.Fatal("wrapper not ready")
	}
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: ts.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	w, err := client.CoreV1().Services("default").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if http2Watches.Load() != 1 {
		t.Fatalf("the watch did not use HTTP/2 (%d HTTP/2 watches)", http2Watches.Load())
	}
	drain := time.After(3 * time.Second) // three watch write timeouts, idle but for the initial ADDED of default/kubernetes
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				t.Fatalf("the idle watch ended (open %v, event %v)", ok, ev)
			}
		case <-drain:
			done = true
		}
	}
	if _, err := admin.CoreV1().Services("default").Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "after-idle"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				t.Fatalf("the idle watch ended before the next event (open %v, event %v)", ok, ev)
			}
			if s, _ := ev.Object.(*corev1.Service); ev.Type == watch.Added && s != nil && s.Name == "after-idle" {
				return
			}
		case <-timeout:
			t.Fatal("no event for the new Service within 2 minutes")
		}
	}
}
