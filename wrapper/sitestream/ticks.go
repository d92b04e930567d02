package sitestream

import (
	"context"
	"time"
)

// onTicks calls f every period until ctx ends, the first time one period
// after the start (wait.Until would call it at once: the loops here must
// first give the state they look at a period to form).
func onTicks(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
