package gridhosts

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// source is one informer feeding the index, and what is known of it: synced,
// or why not. Its errors replace client-go's default handler, which logs at
// every retry: gridhosts logs one line each time the reason changes.
type source struct {
	resource string
	synced   cache.InformerSynced
	// optional: the resource may be missing from the apiserver (the
	// StatefulSetGrid CRD not installed); then it counts as known and empty.
	optional bool

	absent atomic.Bool
	mu     sync.Mutex
	reason string // last reason logged
}

// known reports whether the index holds everything this source has: it has
// synced, or its resource is not served at all.
func (s *source) known() bool {
	return s.synced() || (s.optional && s.absent.Load())
}

// onError is the informer's watch error handler.
func (s *source) onError(ctx context.Context, _ *cache.Reflector, err error) {
	notFound := apierrors.IsNotFound(err)
	if s.optional {
		s.absent.Store(notFound)
	}
	reason := errorReason(err)
	s.mu.Lock()
	changed := reason != s.reason
	s.reason = reason
	s.mu.Unlock()
	if !changed {
		return
	}
	logger := klog.FromContext(ctx)
	switch {
	case s.optional && notFound:
		logger.Info("StatefulSetGrid CRD not installed: no unified names until it is", "resource", s.resource)
	case s.known():
		logger.Info("Lost the apiserver; answering from the last known state", "resource", s.resource, "reason", reason, "err", err)
	default:
		logger.Info("Cannot serve grid names yet: every other name goes to the next plugin", "resource", s.resource, "reason", reason, "err", err)
	}
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

// known reports whether every source is known.
func (ss sources) known() bool {
	for _, s := range ss {
		if !s.known() {
			return false
		}
	}
	return true
}

// waitKnown polls until every source is known or ctx ends.
func (ss sources) waitKnown(ctx context.Context) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !ss.known() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}
