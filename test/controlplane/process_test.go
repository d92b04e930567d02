package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestWaitForNamesEveryError: a wait that times out says which errors its
// checks met and how often, not only the last one.
func TestWaitForNamesEveryError(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	calls := 0
	err := waitFor(ctx, nil, "the thing", func() error {
		calls++
		if calls <= 2 {
			return errors.New("connection refused")
		}
		return errors.New("not ready: [-]poststarthook/rbac failed")
	})
	if err == nil {
		t.Fatal("waitFor returned nil for a check that never passed")
	}
	msg := err.Error()
	for _, want := range []string{
		"timed out waiting for the thing",
		`2x "connection refused"`,
		`x "not ready: [-]poststarthook/rbac failed"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap the context's deadline", err)
	}
}

// TestWaitForReturnsOnceCheckPasses: no error once a check passes.
func TestWaitForReturnsOnceCheckPasses(t *testing.T) {
	calls := 0
	err := waitFor(t.Context(), nil, "the thing", func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("waitFor: %v after %d checks, want nil after 3", err, calls)
	}
}

// TestFailingChecks: what a not-ready kube-apiserver answers on /readyz
// (every check, the failing ones marked) comes down to the failing ones.
func TestFailingChecks(t *testing.T) {
	body := "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]informer-sync ok\n" +
		"[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed\n"
	want := "[-]etcd failed: reason withheld; [-]poststarthook/rbac/bootstrap-roles failed: reason withheld"
	if got := failingChecks([]byte(body)); got != want {
		t.Errorf("failingChecks = %q, want %q", got, want)
	}
	if got := failingChecks([]byte("ok")); got != "" {
		t.Errorf("failingChecks(ok) = %q, want none", got)
	}
}
