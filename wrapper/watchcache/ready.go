package watchcache

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// ReadyState is where a watch cache is in its life, as a small state
// machine (after kube-apiserver's cacher/ready.go):
//
//	Pending --ServeSnapshot--> Snapshot --Live--> Live --Stop--> Stopped
//	Pending --Live--> Live      Snapshot --RefuseSnapshot--> Pending
//
// It serves in Snapshot and Live only.
type ReadyState uint32

const (
	// Pending: not serving; Ready.Waiting says what it waits for.
	Pending ReadyState = iota
	// Snapshot: serving the state of a snapshot its source has not
	// confirmed yet.
	Snapshot
	// Live: serving what its source sent.
	Live
	// Stopped: no longer serving.
	Stopped
)

// Ready is a watch cache's readiness: its state, what it waits for while it
// does not serve, and whatever else keeps its process from being ready
// (Block). The state is read on every request without a lock.
type Ready struct {
	state atomic.Uint32

	mu       sync.Mutex
	waiting  string            // why it does not serve yet
	refused  bool              // the snapshot is not to be served
	blocked  map[string]string // what keeps the process from being ready although it may serve, by what
	onChange func(ready bool)
}

// NewReady is Pending, waiting for its caches; onChange (may be nil) hears
// every change of what Check says, under Ready's lock.
func NewReady(onChange func(ready bool)) *Ready {
	return &Ready{waiting: "caches not synced", onChange: onChange}
}

// State is the current state.
func (r *Ready) State() ReadyState { return ReadyState(r.state.Load()) }

// Serving reports whether requests are served (Snapshot or Live).
func (r *Ready) Serving() bool {
	s := r.State()
	return s == Snapshot || s == Live
}

// Waiting records what the cache waits for; it is what Check says while the
// cache does not serve.
func (r *Ready) Waiting(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = why
}

// ServeSnapshot serves a snapshot while Pending, unless it was refused; it
// reports whether it does.
func (r *Ready) ServeSnapshot() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused || r.State() != Pending {
		return false
	}
	r.setLocked(Snapshot)
	return true
}

// RefuseSnapshot takes a snapshot off (back to Pending, waiting for why)
// and refuses to serve one from now on; only the first call counts: it
// reports whether this one did.
func (r *Ready) RefuseSnapshot(why string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused {
		return false
	}
	r.refused, r.waiting = true, why
	if r.State() == Snapshot {
		r.setLocked(Pending)
	}
	return true
}

// Live serves what the source sent, from Pending or Snapshot.
func (r *Ready) Live() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.State(); s == Pending || s == Snapshot {
		r.setLocked(Live)
	}
}

// Stop stops serving, for good.
func (r *Ready) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setLocked(Stopped)
}

// Block makes the process not ready for why although the cache may serve
// (one of its ports is taken), on behalf of what (the port); "" lifts what's
// block. Each what is lifted on its own: one port freed leaves the others'.
func (r *Ready) Block(what, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.checkLocked() == nil
	if why == "" {
		delete(r.blocked, what)
	} else {
		if r.blocked == nil {
			r.blocked = map[string]string{}
		}
		r.blocked[what] = why
	}
	r.notifyLocked(was)
}

// Check is nil when the process is ready (serving, not blocked), else why
// it is not.
func (r *Ready) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkLocked()
}

func (r *Ready) checkLocked() error {
	switch {
	case len(r.blocked) > 0:
		whys := make([]string, 0, len(r.blocked))
		for _, why := range r.blocked {
			whys = append(whys, why)
		}
		sort.Strings(whys)
		return errors.New(strings.Join(whys, "; "))
	case !r.Serving():
		return errors.New(r.waiting)
	}
	return nil
}

func (r *Ready) setLocked(s ReadyState) {
	was := r.checkLocked() == nil
	r.state.Store(uint32(s))
	r.notifyLocked(was)
}

func (r *Ready) notifyLocked(was bool) {
	if now := r.checkLocked() == nil; now != was && r.onChange != nil {
		r.onChange(now)
	}
}
