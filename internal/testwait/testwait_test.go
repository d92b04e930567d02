package testwait

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestUntilSaysWhatTheCheckBeforeFound: a check the wait's end cuts short
// fails with the context's error; the wait's error also carries what the
// check before it found, which says why the wait failed.
func TestUntilSaysWhatTheCheckBeforeFound(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	calls := 0
	err := Until(ctx, 0, "the thing", func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return errors.New("Complete=False: wave 4/5")
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if err == nil {
		t.Fatal("Until passed a check that never passed")
	}
	for _, want := range []string{"the thing: not within", "context deadline exceeded", "the check before: Complete=False: wave 4/5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Until's error %q does not say %q", err, want)
		}
	}
}

// TestUntilPasses: a check that passes ends the wait with nil.
func TestUntilPasses(t *testing.T) {
	calls := 0
	if err := Until(t.Context(), 0, "the thing", func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("Until: %v after %d checks, want nil after 3", err, calls)
	}
}
