package snapshottrust

import (
	"context"
	"time"
)

// A snapshot's time is when its data was last known current: when the
// apiserver last answered before it was written, not when the file was
// written (during an outage the data ages while the component runs on).
// Both components stamp their snapshots so, and snapshot_age_seconds and
// the maximum age count from it.

// DefaultWriteInterval bounds how often either component rewrites its
// snapshot after a change: the same bound in both, so a node that loses
// power comes back with grid names no further behind than its Service
// rules.
const DefaultWriteInterval = 10 * time.Second

// RefreshInterval: an unchanged snapshot is rewritten this often while the
// apiserver answers, so its time is at most this far behind and a quiet
// cluster's snapshot never grows too old to serve.
const RefreshInterval = time.Hour

// reachProbeTimeout bounds the probe before a write.
const reachProbeTimeout = time.Second

// Stamp keeps when the apiserver last answered. Not safe for concurrent
// use: each component writes one snapshot at a time.
type Stamp struct {
	// Probe asks the apiserver whether it answers now; nil counts as
	// answering.
	Probe     func(context.Context) error
	reachable time.Time
}

// Next probes the apiserver and returns the time for a snapshot written
// now: now when it answers, else when it last did (now before any probe:
// the first write follows the informers' sync).
func (s *Stamp) Next(now time.Time) time.Time {
	if s.Probe == nil {
		s.reachable = now
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), reachProbeTimeout)
		if s.Probe(ctx) == nil {
			s.reachable = now
		}
		cancel()
	}
	if s.reachable.IsZero() {
		return now
	}
	return s.reachable
}

// ForWrite decides a snapshot write at now, the last one stamped last:
// the time to stamp it with and true, or false when the file on disk
// stands. Changed content is always written; unchanged content only to move
// its time on (refreshDue, then rewrite), and the apiserver is probed (Next)
// only for a write that may happen.
func (s *Stamp) ForWrite(unchanged bool, last, now time.Time, final bool) (time.Time, bool) {
	if unchanged && !refreshDue(last, now, final) {
		return time.Time{}, false
	}
	asOf := s.Next(now)
	if unchanged && !rewrite(last, asOf, final) {
		return time.Time{}, false
	}
	return asOf, true
}

// refreshDue reports whether a snapshot stamped last with unchanged content
// may be due for rewriting at now: at shutdown (final), or RefreshInterval
// after last. Only then is the apiserver probed.
func refreshDue(last, now time.Time, final bool) bool {
	return last.IsZero() || final || now.Sub(last) >= RefreshInterval
}

// rewrite reports whether a snapshot stamped last with content unchanged
// since is written again with the time next: always when none was written
// yet, never to keep its time (or move it back), else at shutdown (final)
// or once the time moves on by RefreshInterval.
func rewrite(last, next time.Time, final bool) bool {
	if last.IsZero() {
		return true
	}
	advance := next.Sub(last)
	return advance > 0 && (final || advance >= RefreshInterval)
}
