package watchcache

import "sync/atomic"

// Clock hands out a store's resourceVersions.
//
// An own clock (NewClock) counts up from its start: the wrapper starts it at
// the process start time in nanoseconds, above the versions of the snapshot
// it seeds its stores from and above every version a previous process
// reserved (reservation.go), so versions keep increasing across restarts and
// a client resuming with a version of a previous process is told to relist.
// Every store of one view shares one own clock.
//
// A mirror clock (NewMirrorClock) hands out no versions: it stands at the
// version of the source its one mirror store copies (mirror.go), which moves
// it as the source's list and events arrive.
type Clock struct {
	v       atomic.Uint64
	mirror  bool
	reserve *Reservation // nil: nothing on disk
}

// NewClock starts an own clock at start; reserve, when not nil, has every
// version reserved on disk before it is handed out.
func NewClock(start uint64, reserve *Reservation) *Clock {
	c := &Clock{reserve: reserve}
	c.v.Store(start)
	return c
}

// NewMirrorClock is a mirror store's clock, at 0 until the store's first
// list.
func NewMirrorClock() *Clock { return &Clock{mirror: true} }

// Next returns a new, larger resourceVersion of an own clock.
func (c *Clock) Next() uint64 {
	v := c.v.Add(1)
	if c.reserve != nil {
		c.reserve.cover(v)
	}
	return v
}

// Current returns the last resourceVersion handed out (an own clock) or
// reached by the source (a mirror clock).
func (c *Clock) Current() uint64 { return c.v.Load() }

// follow sets a mirror clock to its source's version; its store's lock is
// held. An own clock is never set: its versions only ever grow.
func (c *Clock) follow(rv uint64) {
	if c.mirror {
		c.v.Store(rv)
	}
}
