package wrapper

import "context"

// Run processes the queue until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for s.processNext(ctx) {
	}
}

// refilter re-filters keys for an informer's handler. When the syncer is
// idle (no key queued, no re-filtering running) it does so at once on the
// handler's goroutine: a change then reaches the stores without one more
// hand-off to the queue's worker, whose wait for a CPU would count in the
// change's latency. Otherwise the keys are queued, and the queue merges
// repeated changes of a key while the worker is busy. Either way sync reads
// the caches under mu, so each key is served in the order its changes were
// cached, and a queued key synced here too is merely compared again.
func (s *Syncer) refilter(keys ...syncKey) {
	if ctx := s.serving.Load(); ctx != nil && s.queue.Len() == 0 && s.mu.TryLock() {
		defer s.mu.Unlock()
		for _, k := range keys {
			s.syncLocked(*ctx, k)
		}
		return
	}
	for _, k := range keys {
		s.queue.Add(k)
	}
}

func (s *Syncer) processNext(ctx context.Context) bool {
	k, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(k)
	s.sync(ctx, k)
	s.queue.Forget(k)
	return true
}
