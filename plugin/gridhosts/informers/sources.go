package informers

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// source is one informer feeding the index, and what is known of it: synced,
// or why not. Its errors replace client-go's default handler, which logs at
// every retry. Before the first sync, one line (logged by waitKnown) says
// why grid names cannot be served; after it, one line per new reason.
type source struct {
	resource string
	synced   cache.InformerSynced
	// optional: the resource may be missing from the apiserver (the
	// StatefulSetGrid CRD not installed); then it counts as known and empty.
	optional bool

	absent atomic.Bool
	mu     sync.Mutex
	reason string // last reason seen
	err    error  // last error seen
	// announced is set once the start-up line has been logged; later
	// changes of reason are logged as they come.
	announced *atomic.Bool
	// also is told every error too.
	also func(context.Context, error)
}

// known reports whether the index holds everything this source has: it has
// synced, or its resource is not served at all.
func (s *source) known() bool {
	return s.synced() || (s.optional && s.absent.Load())
}

// onError is the informer's watch error handler.
func (s *source) onError(ctx context.Context, _ *cache.Reflector, err error) {
	if s.also != nil {
		s.also(ctx, err)
	}
	notFound := apierrors.IsNotFound(err)
	if s.optional {
		s.absent.Store(notFound)
	}
	reason := errorReason(err)
	s.mu.Lock()
	changed := reason != s.reason
	s.reason, s.err = reason, err
	s.mu.Unlock()
	if !changed || !s.announced.Load() {
		return
	}
	logger := klog.FromContext(ctx)
	switch {
	case s.optional && notFound:
		logger.Info("StatefulSetGrid CRD not installed: no unified names until it is", "resource", s.resource)
	case s.known():
		logger.Info("Lost the apiserver; answering grid names from the last known state", "resource", s.resource, "reason", reason, "err", err)
	default:
		logger.Info("Still cannot serve grid names", "resource", s.resource, "reason", reason, "err", err)
	}
}

// why says why a source is not known yet.
func (s *source) why() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		// Refused connections are retried inside client-go without
		// reaching the error handler.
		return s.resource + ": no list answered yet (apiserver unreachable or slow)"
	}
	return s.resource + ": " + s.reason + ": " + s.err.Error()
}

// errorReason classifies a list/watch error for the one-line log.
func errorReason(err error) string {
	var netErr net.Error
	switch {
	case apierrors.IsNotFound(err):
		return "NotFound"
	case apierrors.IsForbidden(err):
		return "Forbidden"
	case apierrors.IsUnauthorized(err):
		return "Unauthorized"
	case errors.As(err, &netErr):
		return "Unreachable"
	default:
		if r := apierrors.ReasonForError(err); r != "" {
			return string(r)
		}
		return "Error"
	}
}

// sources is every informer of one watcher.
type sources []*source

// failing reports whether some source that is not known has reported an
// error.
func (ss sources) failing() bool {
	for _, s := range ss {
		s.mu.Lock()
		failed := s.err != nil
		s.mu.Unlock()
		if failed && !s.known() {
			return true
		}
	}
	return false
}

// known reports whether every source is known.
func (ss sources) known() bool {
	for _, s := range ss {
		if !s.known() {
			return false
		}
	}
	return true
}

// waitKnown polls until every source is known or ctx ends. If that takes
// longer than the kubernetes plugin's own start-up bound, it logs one line
// saying why, then every change of reason is logged by onError.
func (ss sources) waitKnown(ctx context.Context, after time.Duration) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(after)
	announced := false
	for !ss.known() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if !announced && time.Now().After(deadline) {
			announced = true
			var why []string
			absent := false
			for _, s := range ss {
				if s.optional && s.absent.Load() {
					absent = true
				}
				if !s.known() {
					why = append(why, s.why())
				}
			}
			for _, s := range ss {
				s.announced.Store(true)
			}
			if absent {
				klog.FromContext(ctx).Info("StatefulSetGrid CRD not installed: no unified names until it is")
			}
			if !ss.known() {
				klog.FromContext(ctx).Info("Cannot serve grid names yet: every other name goes to the next plugin", "why", strings.Join(why, "; "))
			}
		}
	}
	if !announced {
		for _, s := range ss {
			if s.optional && s.absent.Load() {
				klog.FromContext(ctx).Info("StatefulSetGrid CRD not installed: no unified names until it is")
			}
			s.announced.Store(true)
		}
	}
	return true
}
