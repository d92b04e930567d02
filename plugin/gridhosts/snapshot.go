package gridhosts

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/internal/statefile"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

// defaultSnapshotInterval bounds how often the snapshot is rewritten (only
// when the index changed, so a quiet grid writes nothing): the wrapper's
// bound too. Package config checks a given interval's bounds.
const defaultSnapshotInterval = snapshottrust.DefaultWriteInterval

// The plugin's use of its snapshot (package snapshot): read at start-up,
// answered from until the informers are known if package snapshottrust's
// Life allows it (snapshot_trust.go), then written from the live index.

// loadSnapshot reads this block's snapshot for start-up. Any reason not to
// use it is one log line; the result is then nil.
func (g *GridHosts) loadSnapshot(logger klog.Logger) (*index.Index, *snapshot.Body, snapshot.Header) {
	s := g.snapshot
	s.Prepare()
	h, b, err := snapshot.Read(s.Path, s.Owner)
	var se *statefile.Error
	switch {
	case errors.As(err, &se) && se.Reason == statefile.ReasonPreviousFormat:
		logger.Info("Snapshot not used: written by an earlier version in a layout this one does not read; answering once the informers sync, and writing the new layout then",
			"path", s.Path, "reason", se.Reason)
		return nil, nil, snapshot.Header{}
	case errors.As(err, &se):
		logger.Info("Snapshot not used", "path", s.Path, "reason", se.Reason, "err", err)
		return nil, nil, snapshot.Header{}
	case err != nil:
		logger.Info("Snapshot not used", "path", s.Path, "err", err)
		return nil, nil, snapshot.Header{}
	}
	return b.Index(g.nodeMode()), b, h
}

// serveSnapshot answers from x (read from a snapshot written at written)
// until the informers are known, unless they already are.
func (g *GridHosts) serveSnapshot(logger klog.Logger, x *index.Index, h snapshot.Header) {
	g.mode.Lock()
	defer g.mode.Unlock()
	if g.synced.Load() || !g.snapshot.Life.Serve(h.Written) {
		return
	}
	g.snap.Store(x)
	snapshot.Serving.Set(1)
	n := x.Counts()
	logger.Info("Apiserver not synced: answering grid names from the snapshot until it is",
		"path", g.snapshot.Path, "written", h.Written.Format(time.RFC3339), "age", time.Since(h.Written).Round(time.Second).String(),
		"grids", n.Grids, "statefulSets", n.StatefulSets, "pods", n.Pods, "services", n.Services, "nodes", n.Nodes, "endpointSlices", n.EndpointSlices)
}

// goLive switches answers to the informers' index once they are known,
// dropping the snapshot's. It reports whether a snapshot was being served.
func (g *GridHosts) goLive() bool {
	g.mode.Lock()
	defer g.mode.Unlock()
	g.synced.Store(true)
	if g.snap.Swap(nil) == nil {
		return false
	}
	g.snapshot.Life.Confirm()
	snapshot.Serving.Set(0)
	return true
}

// runSnapshots writes the live index once the informers are first known,
// then at most once per interval, until ctx ends. Nothing is written before
// that: a partial index must never replace a complete snapshot.
func (g *GridHosts) runSnapshots(ctx context.Context, live <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-live:
	}
	wait.UntilWithContext(ctx, func(context.Context) { g.snapshot.Write(g.index, false) }, g.snapshot.Interval)
}
