package watchcache

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// A list waiting for a version a mirror has not reached is woken by the
// event or BOOKMARK that brings it there, not by a poll; it gives up at its
// bound or with its context, and a version already reached does not wait.
func TestMirrorWaitFresh(t *testing.T) {
	st := Services.NewMirrorStore(LogLimits{Bytes: 1 << 20, MaxLagBytes: 1 << 20})
	st.ReplaceAt(map[string]Object{}, 100)
	if !st.WaitFresh(t.Context(), 100, 0) {
		t.Fatal("a version already reached waited")
	}
	got := make(chan bool)
	go func() { got <- st.WaitFresh(t.Context(), 120, time.Minute) }()
	time.Sleep(50 * time.Millisecond)
	st.ApplyAt(watch.Added, "ns/a", testService("a"), 110) // not there yet
	select {
	case <-got:
		t.Fatal("woken before the version was reached")
	case <-time.After(50 * time.Millisecond):
	}
	start := time.Now()
	st.ProgressTo(120)
	select {
	case ok := <-got:
		if !ok || time.Since(start) > 10*time.Second {
			t.Fatalf("WaitFresh = %v %s after the BOOKMARK that reached it", ok, time.Since(start))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not woken when the version was reached")
	}
	if st.WaitFresh(t.Context(), 200, 50*time.Millisecond) {
		t.Fatal("a version never reached was waited for successfully")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if st.WaitFresh(ctx, 200, time.Minute) {
		t.Fatal("a cancelled wait succeeded")
	}
}
