package sitestream

import (
	"fmt"
	"testing"
	"time"
)

// A source failing authentication is refused before any TokenReview once
// it has used its burst, gets one more try per failureEvery, and other
// sources are not affected.
func TestAuthFailuresPerSource(t *testing.T) {
	f := newAuthFailures()
	now := time.Unix(1000, 0)
	for i := range failureBurst {
		if f.exhausted("10.0.0.66", now) {
			t.Fatalf("refused after %d failures, before its burst of %d", i, failureBurst)
		}
		f.failed("10.0.0.66", now)
	}
	if !f.exhausted("10.0.0.66", now) {
		t.Fatal("a source that failed its burst is still reviewed")
	}
	if f.exhausted("10.0.0.7", now) {
		t.Fatal("another source is refused")
	}
	now = now.Add(failureEvery)
	if f.exhausted("10.0.0.66", now) {
		t.Fatalf("no new try after %s", failureEvery)
	}
	f.failed("10.0.0.66", now)
	if !f.exhausted("10.0.0.66", now) {
		t.Fatal("two tries for one period")
	}
	// Remembered sources are bounded.
	for i := range 2 * failureSources {
		f.failed(fmt.Sprintf("10.1.%d.%d", i/256, i%256), now)
	}
	if n := len(f.sources); n > failureSources {
		t.Fatalf("%d sources remembered, want at most %d", n, failureSources)
	}
	if got := host("[fe80::1]:443"); got != "fe80::1" {
		t.Fatalf("host of [fe80::1]:443: %q", got)
	}
}
