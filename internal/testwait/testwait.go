// Package testwait is the bounded wait the end-to-end and real-node tests
// share: poll a check until it passes, fail the test when the bound ends.
package testwait

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Floor is the least any wait lasts. The bound only ends a failing test,
// so it is set for the slowest case the suites meet: after an apiserver
// outage client-go's reflectors retry their watches with a backoff of up to
// 30s, jittered up to twice that, so a change made right after the
// apiserver returns may take a minute to reach an informer; a 30s bound
// failed an end-to-end DNS check once while kube-proxy's rules had already
// followed. On a 2-core machine running the whole suite (CI of a2ae408,
// 2026-12-02), a six-nodeunit rollout through kube-controller-manager was
// still at its fourth wave of five after 2 minutes: the apiservers of some
// ten tests shared the two cores.
const Floor = 4 * time.Minute

// interval is how often a check runs: often enough that a passing check
// ends the wait at once, seldom enough to add no load.
const interval = 200 * time.Millisecond

// Eventually calls check until it returns nil, and fails t with what and
// check's last error when max(timeout, Floor) has passed or ctx ends.
func Eventually(ctx context.Context, t testing.TB, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	if err := Until(ctx, timeout, what, check); err != nil {
		t.Fatal(err)
	}
}

// Until is Eventually's wait for a goroutine that may not end the test: it
// returns what and check's last error when max(timeout, Floor) has passed
// or ctx ends, nil once check passes.
func Until(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	timeout = max(timeout, Floor)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last, before error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil && last != nil {
			// The wait's end cut this check short (its error is the
			// context's): say what the one before found too.
			before = last
		}
		last = err
		select {
		case <-ctx.Done():
			if before != nil {
				return fmt.Errorf("%s: not within %s: %v; the check before: %v", what, timeout, last, before)
			}
			return fmt.Errorf("%s: not within %s: %v", what, timeout, last)
		case <-time.After(interval):
		}
	}
}

// HTTPOK is a check for Eventually: a GET of url answers 200.
func HTTPOK(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		code, body, err := Get(ctx, url)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", url, code, body[:min(len(body), 4<<10)])
		}
		return nil
	}
}

// Get GETs url for a check that reads the answer: its status code and
// body (the first 1 MiB).
func Get(ctx context.Context, url string) (code int, body string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}
