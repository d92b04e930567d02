package sitestream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
)

// TestLeaderStreamEndsResumable checks what client-go's watch sees when a
// leader's stream fails or ends by itself: never an ERROR event, and never
// an end within a second with no event (the reflector relists after
// either), so the reflector resumes from its version.
func TestLeaderStreamEndsResumable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		serve     func(w http.ResponseWriter)
		wantGiven bool // the leader is given up
	}{
		{"reset after an event", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(`{"type":"BOOKMARK","object":{"kind":"Service","apiVersion":"v1","metadata":{"resourceVersion":"5"}}}` + "\n"))
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
			// What the leader's HTTP/2 server sends when its write to
			// a follower times out: RST_STREAM INTERNAL_ERROR.
			panic(http.ErrAbortHandler)
		}, true},
		{"reset at once", func(w http.ResponseWriter) {
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, true},
		{"ended at once", func(w http.ResponseWriter) {
			w.(http.Flusher).Flush()
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if req.URL.Query().Get("watch") != "true" || req.ProtoMajor != 2 {
					http.Error(w, "want an HTTP/2 watch", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				tc.serve(w)
			}))
			leader.EnableHTTP2 = true
			leader.StartTLS()
			defer leader.Close()
			sum := sha256.Sum256(leader.Certificate().Raw)
			opts := Options{Token: func() (string, error) { return "peer-token", nil }, IdleTimeout: time.Minute}
			r := newPeerRouter(opts, "self")
			r.setLeader(klog.Background(), siteid.Identity("leader", strings.TrimPrefix(leader.URL, "https://"), hex.EncodeToString(sum[:])))
			// Upstream is never asked: a closed port.
			client := routedClient(t, r, "https://127.0.0.1:1")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			start := time.Now()
			w, err := client.CoreV1().Services("").Watch(ctx, metav1.ListOptions{ResourceVersion: "5", AllowWatchBookmarks: true})
			if err != nil {
				t.Fatalf("watch through the leader: %v", err)
			}
			events := 0
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					t.Errorf("the watch got an ERROR event (the reflector relists): %v", ev.Object)
				}
				events++
			}
			// client-go's reflector: "very short watch" below a second
			// with no event.
			if d := time.Since(start); events == 0 && d < time.Second {
				t.Errorf("the watch ended after %s with no event (the reflector relists)", d)
			}
			if given := r.source() == nil; given != tc.wantGiven {
				t.Errorf("leader given up: %v, want %v", given, tc.wantGiven)
			}
			if n := r.leaderWatches.Load(); n != 1 {
				t.Errorf("%d watches served by the leader, want 1", n)
			}
		})
	}
}
