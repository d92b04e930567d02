package wrapper

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// DefaultOnDemandIdleTimeout is how long what is fetched on demand (v1
// Endpoints; objects kube-proxy's selectors leave out) keeps being fetched
// after the last client that asked for it went away.
const DefaultOnDemandIdleTimeout = 5 * time.Minute

// demand runs upstream informers only while clients ask for what they
// fetch. The first request starts them (and is told "not ready" until they
// have synced and every Service has been re-filtered); once no such request
// or watch has been open for idle they stop and what they fetched is
// removed from the caches, which the syncer turns into served objects
// removed.
type demand struct {
	what string // for logs: "Endpoints", ...
	idle time.Duration
	// fetch runs the informers until ctx ends, calls synced once they have
	// synced, and removes what they fetched before it returns.
	fetch func(ctx context.Context, synced func())

	mu      sync.Mutex
	ctx     context.Context // Run's, set by run
	running context.CancelFunc
	done    chan struct{} // closed when the last fetch has returned
	users   int
	lastUse time.Time
	ready   atomic.Bool
}

// Fetching reports whether the informers run or are still stopping.
func (d *demand) Fetching() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running != nil {
		return true
	}
	if d.done == nil {
		return false
	}
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// use records a request until release is called, starting the informers if
// needed. ready is false until what they fetched is served.
func (d *demand) use() (ready bool, release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users++
	d.lastUse = time.Now()
	if d.running == nil && d.ctx != nil {
		d.start()
	}
	return d.ready.Load(), func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.users--
		d.lastUse = time.Now()
	}
}

// run stops the informers when idle, until ctx ends.
func (d *demand) run(ctx context.Context) {
	d.mu.Lock()
	d.ctx = ctx
	if d.users > 0 && d.running == nil {
		d.start()
	}
	d.mu.Unlock()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.running != nil && d.users == 0 && time.Since(d.lastUse) >= d.idle {
			klog.FromContext(ctx).Info("No client asked for a while: no longer fetching from upstream", "what", d.what, "idle", d.idle)
			d.running()
			d.running = nil
			d.ready.Store(false)
		}
	}, max(d.idle/4, 100*time.Millisecond))
}

// await waits at most within for what is fetched to be served.
func (d *demand) await(ctx context.Context, within time.Duration) bool {
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, within, true, func(context.Context) (bool, error) {
		return d.ready.Load(), nil
	}) == nil
}

// waitIfFetching waits until running informers have synced (a snapshot's
// objects are then confirmed by upstream's, not dropped first).
func (d *demand) waitIfFetching(ctx context.Context) {
	for {
		d.mu.Lock()
		running := d.running != nil
		d.mu.Unlock()
		if !running || d.ready.Load() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errDemandIdle is why a fetch stops when no client asks any more; a fetch
// stopped because the wrapper stops keeps what it fetched served (the last
// snapshot is written after).
var errDemandIdle = errors.New("no client asked for a while")

// start runs fetch; d.mu is held. A previous fetch has been cancelled: the
// new one starts once it has cleaned up.
func (d *demand) start() {
	ctx, cancel := context.WithCancelCause(d.ctx)
	d.running = func() { cancel(errDemandIdle) }
	prev := d.done
	done := make(chan struct{})
	d.done = done
	klog.FromContext(ctx).Info("A client asked: fetching from upstream", "what", d.what)
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		d.fetch(ctx, func() { d.ready.Store(true) })
	}()
}
