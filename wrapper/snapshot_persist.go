package wrapper

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/internal/statefile"
)

var (
	snapshotWrites       = metric.NewCounterVec(snapshottrust.WritesCounterOpts(metricsNamespace, ""), []string{"result"})
	snapshotBytes        = metric.Gauge("snapshot_bytes", "Size of the last snapshot written.")
	snapshotWriteSeconds = metric.Gauge("snapshot_write_duration_seconds",
		"Time the last snapshot write took (collect, encode, fsync, rename).")
	// servingSnapshotSince is the writtenAt of the snapshot being served
	// while upstream has not confirmed it.
	servingSnapshotSince snapshottrust.Age
	snapshotAge          = metric.NewGaugeFunc(snapshottrust.AgeGaugeOpts(metricsNamespace, ""), servingSnapshotSince.Seconds)
)

// persister keeps the snapshot of the served stores in a state directory.
type persister struct {
	dir, node, upstream string
	maxAge              time.Duration
	codec               snapshotCodec
	resources           []*servedResource // in servedResources order
	clock               *Clock

	// stamp gives each snapshot its writtenAt (package snapshottrust's
	// rule, gridhosts' too).
	stamp    snapshottrust.Stamp
	written  uint64    // clock value of the last successful write
	lastAsOf time.Time // writtenAt of the last successful write; zero before
	failing  bool      // the last write failed (one error line per run of failures)
	// lastError is the last write's error ("" after a success), for /readyz.
	lastError atomic.Value
}

// snapshotFile is the snapshot's name inside the state directory.
const snapshotFile = "snapshot.pb"

func (p *persister) path() string { return filepath.Join(p.dir, snapshotFile) }

// load reads the snapshot. Missing, unreadable or bad snapshots are logged
// in one line and give nil: the wrapper then starts as without one.
func (p *persister) load(logger klog.Logger) *snapshot {
	statefile.RemoveTemps(p.dir, snapshotFile)
	data, err := statefile.ReadFramed(p.path(), snapshotFormat, snapshotMaxBytes)
	var sn *snapshot
	if err == nil {
		sn, err = p.codec.decode(data, p.node, p.upstream)
	}
	var se *statefile.Error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		logger.Info("No snapshot to serve before upstream answers", "path", p.path())
		return nil
	case errors.As(err, &se) && se.Reason == statefile.ReasonPreviousFormat:
		logger.Info("Ignoring snapshot: written by an earlier version in a layout this one does not read; serving once upstream answers, and writing the new layout then",
			"path", p.path(), "reason", se.Reason)
		return nil
	case errors.As(err, &se):
		logger.Info("Ignoring snapshot", "path", p.path(), "reason", se.Reason, "err", err)
		return nil
	case err != nil:
		logger.Info("Ignoring snapshot", "path", p.path(), "reason", statefile.ReasonInvalid, "err", err)
		return nil
	}
	if v := snapshottrust.TooOld(sn.header.WrittenAt, p.maxAge, time.Now()); !v.Serve {
		snapshotsRefused.WithLabelValues(v.Reason).Inc()
		logger.Info("Ignoring snapshot", "path", p.path(), "reason", v.Reason, "writtenAt", sn.header.WrittenAt, "detail", v.Detail)
		return nil
	}
	return sn
}

// maybeWrite writes a snapshot when something was served since the last
// one, and an unchanged one again only to move its writtenAt on
// (snapshottrust.Rewrite): at shutdown (final) or hourly. Upstream is
// probed only for a write that may happen.
func (p *persister) maybeWrite(logger klog.Logger, final bool) {
	unchanged := p.clock.Current() == p.written && !p.lastAsOf.IsZero()
	if unchanged && !snapshottrust.RefreshDue(p.lastAsOf, time.Now(), final) {
		snapshotWrites.WithLabelValues("unchanged").Inc()
		return
	}
	asOf := p.stamp.Next(time.Now())
	if unchanged && !snapshottrust.Rewrite(p.lastAsOf, asOf, final) {
		snapshotWrites.WithLabelValues("unchanged").Inc()
		return
	}
	p.write(logger, asOf)
}

// write collects every store (each consistent in itself, see
// snapshotState) and replaces the snapshot file, stamped asOf. A failure (full disk,
// read-only or foreign-owned directory) is logged once per run of
// failures; the wrapper goes on serving from memory and tries again later.
func (p *persister) write(logger klog.Logger, asOf time.Time) {
	start := time.Now()
	clockAt := p.clock.Current()
	lists := make([]snapshotList, 0, len(p.resources))
	for _, r := range p.resources {
		objs, from, at := r.store.snapshotState()
		lists = append(lists, snapshotList{res: r.resource, items: objs,
			section: snapshotSection{Resource: r.name, From: from, At: at, Objects: len(objs)}})
	}
	h := snapshotHeader{NodeName: p.node, Upstream: p.upstream, WrittenAt: asOf.UTC()}
	n, err := statefile.WriteFramed(p.dir, snapshotFile, snapshotFormat, func(w io.Writer) error { return p.codec.encode(w, h, lists) })
	if err != nil {
		snapshotWrites.WithLabelValues("failed").Inc()
		if !p.failing {
			logger.Error(err, "Snapshot not written: serving from memory only; a restart while upstream is away would serve nothing until this is fixed",
				"path", p.path())
		}
		p.failing = true
		p.lastError.Store(err.Error())
		return
	}
	if p.failing {
		logger.Info("Snapshot written again", "path", p.path())
	}
	p.failing = false
	p.lastError.Store("")
	p.written, p.lastAsOf = clockAt, asOf
	snapshotWrites.WithLabelValues("written").Inc()
	snapshotBytes.Set(float64(n))
	snapshotWriteSeconds.Set(time.Since(start).Seconds())
	logger.V(4).Info("Snapshot written", "path", p.path(), "bytes", n, "duration", time.Since(start))
}
