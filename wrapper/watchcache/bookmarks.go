package watchcache

import (
	"context"
	"time"
)

// RunBookmarks makes a BOOKMARK due every period for each watcher of stores
// that asked for them, the first one period after the start, until ctx
// ends. With report it also sets each store's served_objects and
// event_log_bytes; before, when not nil, runs first on every tick.
func RunBookmarks(ctx context.Context, period time.Duration, stores []*Store, report bool, before func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if before != nil {
				before()
			}
			for _, st := range stores {
				st.Bookmark()
				if report {
					servedObjects.WithLabelValues(st.resource).Set(float64(st.Len()))
					eventLogBytes.WithLabelValues(st.resource).Set(float64(st.LogBytes()))
				}
			}
		}
	}
}
