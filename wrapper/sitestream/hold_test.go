package sitestream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
)

// closedPort returns an address nothing listens on (connection refused).
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func routedClient(t *testing.T, r *peerRouter, upstream string) kubernetes.Interface {
	t.Helper()
	// QPS -1: no client-side rate limit, so many lists start at once.
	cfg := &rest.Config{Host: upstream, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1}
	cfg.Wrap(r.wrap)
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// listingLeader serves every request with an empty ServiceList at version
// 7, as a leader would a list; it returns the leader's identity and the
// count of requests it served.
func listingLeader(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	served := new(atomic.Int64)
	leader := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}`))
	}))
	leader.EnableHTTP2 = true
	leader.StartTLS()
	t.Cleanup(leader.Close)
	sum := sha256.Sum256(leader.Certificate().Raw)
	return siteid.Identity("leader", strings.TrimPrefix(leader.URL, "https://"), hex.EncodeToString(sum[:])), served
}

// TestUnansweredRequestHeld checks that a list upstream does not answer
// is held, not failed, until a source answers: here a leader that becomes
// known meanwhile; and that the request still ends with its context, and
// that an answer (even a refusal) is passed on at once.
func TestUnansweredRequestHeld(t *testing.T) {
	identity, served := listingLeader(t)
	opts := Options{Token: func() (string, error) { return "peer-token", nil }, IdleTimeout: time.Minute, RetryPeriod: 100 * time.Millisecond}
	r := newPeerRouter(opts, "self")
	client := routedClient(t, r, "https://"+closedPort(t))

	t.Run("until a leader answers", func(t *testing.T) {
		type result struct {
			rv  string
			err error
		}
		done := make(chan result, 1)
		go func() {
			l, err := client.CoreV1().Services("").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				done <- result{err: err}
				return
			}
			done <- result{rv: l.ResourceVersion}
		}()
		// Upstream refuses every connection: the list is tried again and
		// again, but never fails back to the caller.
		select {
		case res := <-done:
			t.Fatalf("the list ended while no source answered: %+v", res)
		case <-time.After(time.Second):
		}
		if n := r.heldRequests.Load(); n != 1 {
			t.Errorf("%d requests held, want 1", n)
		}
		r.setLeader(klog.Background(), identity)
		select {
		case res := <-done:
			if res.err != nil || res.rv != "7" {
				t.Fatalf("the held list: %+v, want the leader's list at version 7", res)
			}
		case <-time.After(time.Minute):
			t.Fatal("the held list did not move to the leader")
		}
		if served.Load() != 1 {
			t.Errorf("the leader served %d requests, want 1", served.Load())
		}
		if n := r.failedRequests.Load(); n != 0 {
			t.Errorf("%d requests failed back to the caller, want 0", n)
		}
		r.setLeader(klog.Background(), "")
	})

	t.Run("until its context ends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a held list whose context ended: %v, want its deadline", err)
		}
	})

	t.Run("an answer is not held", func(t *testing.T) {
		refusing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`))
		}))
		defer refusing.Close()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := routedClient(t, r, refusing.URL).CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("a list upstream refuses: %v, want its 403", err)
		}
	})
}

// TestUpstreamStreamEndsResumable checks that a watch from the apiserver
// that breaks (a reset stream: a cut link, a connection found dead) reads
// as a clean end no earlier than a second, which client-go's reflector
// resumes from its version instead of relisting; and that an ERROR the
// apiserver sends (410: the version is gone) still reaches it, since only
// a relist recovers from that.
func TestUpstreamStreamEndsResumable(t *testing.T) {
	const expired = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 5 (9)","reason":"Expired","code":410}}` + "\n"
	for _, tc := range []struct {
		name      string
		serve     func(w http.ResponseWriter)
		want410   bool
		wantAfter time.Duration
	}{
		{"reset", func(w http.ResponseWriter) {
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // RST_STREAM INTERNAL_ERROR
		}, false, time.Second},
		{"410 Expired", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(expired))
		}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apiserver := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				tc.serve(w)
			}))
			apiserver.EnableHTTP2 = true
			apiserver.StartTLS()
			defer apiserver.Close()
			r := newPeerRouter(Options{IdleTimeout: time.Minute, RetryPeriod: time.Second}, "self")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			start := time.Now()
			w, err := routedClient(t, r, apiserver.URL).CoreV1().Services("").Watch(ctx, metav1.ListOptions{ResourceVersion: "5"})
			if err != nil {
				t.Fatal(err)
			}
			got410 := false
			for ev := range w.ResultChan() {
				if ev.Type != watch.Error {
					continue
				}
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == http.StatusGone {
					got410 = true
				} else {
					t.Errorf("the watch got an ERROR event (the reflector relists): %v", ev.Object)
				}
			}
			if got410 != tc.want410 {
				t.Errorf("410 Expired seen: %v, want %v", got410, tc.want410)
			}
			if d := time.Since(start); d < tc.wantAfter {
				t.Errorf("the watch ended after %s with no event (the reflector relists)", d)
			}
		})
	}
}

// TestHeldRequestsSeeEveryLeaderChange checks that a held request moves to
// a leader set at any moment of its retry loop, including while it is
// handling upstream's refusal or sending again: many requests retrying
// every millisecond against a closed port, over several rounds, each round
// ending only when every one of them reached the leader.
func TestHeldRequestsSeeEveryLeaderChange(t *testing.T) {
	identity, served := listingLeader(t)
	opts := Options{Token: func() (string, error) { return "peer-token", nil }, IdleTimeout: time.Minute, RetryPeriod: time.Millisecond}
	r := newPeerRouter(opts, "self")
	client := routedClient(t, r, "https://"+closedPort(t))
	const rounds, requests = 10, 20
	for round := range rounds {
		done := make(chan error, requests)
		for range requests {
			go func() {
				_, err := client.CoreV1().Services("").List(t.Context(), metav1.ListOptions{})
				done <- err
			}()
		}
		// Let every request be refused and retried a few times.
		for deadline := time.Now().Add(10 * time.Second); r.heldRequests.Load() < int64((round+1)*requests); {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d requests held, want %d", round, r.heldRequests.Load(), (round+1)*requests)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		r.setLeader(klog.Background(), identity)
		timeout := time.After(20 * time.Second)
		for i := range requests {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("round %d: a held list failed: %v", round, err)
				}
			case <-timeout:
				t.Fatalf("round %d: %d of %d held lists did not move to the leader", round, requests-i, requests)
			}
		}
		r.setLeader(klog.Background(), "")
	}
	if got := served.Load(); got != rounds*requests {
		t.Errorf("the leader served %d lists, want %d", got, rounds*requests)
	}
}
