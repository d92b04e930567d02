package probe

import (
	"sync"
	"time"
)

// A timed-out attempt says the network lost the packet only if the prober
// was running while it waited. On this 2-core machine the whole host (a
// VM) now and then stops everything for seconds: in one CI run every
// client's loops went quiet for 4 s at once, and the attempts in flight
// then "timed out" because their timers and their answers woke together
// (a query answered, logged ok 4.1 s after it started, against a 2 s
// timeout). stallWatch tells those apart: a goroutine that wakes every
// watchTick and records every time it woke at least stallMin late. An
// attempt that timed out while the prober was held up for StallLimit or
// more of its wait is logged "stall", not "fail"; an attempt that got an
// answer (a refused connection, a wrong address) is judged as usual.
const (
	watchTick = 50 * time.Millisecond
	stallMin  = 250 * time.Millisecond
	// StallLimit: a second is a third of a request's timeout and half a
	// query's; a host held for that long no longer gives the answer the
	// time the timeout promised it (a lost SYN's retransmission is at 1 s).
	StallLimit = time.Second
	// keepStalls bounds how long a stall is remembered: longer than any
	// attempt lasts.
	keepStalls = time.Minute
)

type stall struct{ from, to time.Time }

// stallWatch records when this process could not run.
type stallWatch struct {
	mu     sync.Mutex
	last   time.Time // when the watch last woke
	stalls []stall
}

func newStallWatch(now time.Time) *stallWatch { return &stallWatch{last: now} }

// woke records a wake-up at now.
func (w *stallWatch) woke(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.last) >= stallMin {
		w.stalls = append(w.stalls, stall{from: w.last, to: now})
	}
	w.last = now
	for len(w.stalls) > 0 && now.Sub(w.stalls[0].to) > keepStalls {
		w.stalls = w.stalls[1:]
	}
}

// run wakes every watchTick until done is closed.
func (w *stallWatch) run(done <-chan struct{}) {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			w.woke(time.Now())
		}
	}
}

// held is how long the process was held up between from and to: the
// stalls recorded, and one still open when the watch has not woken since
// stallMin before to (the attempt's goroutine ran first after it).
func (w *stallWatch) held(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	overlap := func(s stall) {
		if a, b := later(s.from, from), earlier(s.to, to); b.After(a) {
			d += b.Sub(a)
		}
	}
	for _, s := range w.stalls {
		overlap(s)
	}
	if to.Sub(w.last) >= stallMin {
		overlap(stall{from: w.last, to: to})
	}
	return d
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
