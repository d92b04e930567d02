package snapshot

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/internal/statefile"
)

// fileName is the snapshot's name inside the state directory.
const fileName = "snapshot.pb"

// Source is one section's live state.
type Source struct {
	Kind Kind
	// State returns the served objects and the versions [from, at] at which
	// exactly these were served (consistent in itself: no change of them
	// falls between the three).
	State func() (objs []Object, from, at uint64)
}

// Clock is the writer's resourceVersion clock.
type Clock interface{ Current() uint64 }

// Metrics are the owner's instruments a Persister updates: the owner names
// and registers them, so their names stay its own.
type Metrics struct {
	// Writes counts writes by result: "written", "unchanged", "failed".
	Writes *prometheus.CounterVec
	// Bytes and WriteSeconds are the last write's size and time.
	Bytes, WriteSeconds prometheus.Gauge
	// Refused counts snapshots not served, by reason ("too-old" here).
	Refused *prometheus.CounterVec
}

// Persister keeps the snapshot of Sources in a state directory.
type Persister struct {
	Dir, Node, Upstream string
	// MaxAge: a snapshot written longer ago is not loaded (0: any).
	MaxAge  time.Duration
	Codec   Codec
	Sources []Source // in the codec's kinds' order
	Clock   Clock
	Metrics Metrics
	// Stamp gives each snapshot its writtenAt (package snapshottrust's
	// rule, gridhosts' too); its Probe asks upstream.
	Stamp snapshottrust.Stamp

	written  uint64    // clock value of the last successful write
	lastAsOf time.Time // writtenAt of the last successful write; zero before
	failing  bool      // the last write failed (one error line per run of failures)
	// lastError is the last write's error ("" after a success), for /readyz.
	lastError atomic.Value
}

// Path is the snapshot file's.
func (p *Persister) Path() string { return filepath.Join(p.Dir, fileName) }

// LastError is the last write's error, "" when it succeeded or there was none.
func (p *Persister) LastError() string {
	e, _ := p.lastError.Load().(string)
	return e
}

// MarkWritten records clockAt as the clock value of the last write: the
// state served then (a loaded snapshot's) counts as written.
func (p *Persister) MarkWritten(clockAt uint64) { p.written = clockAt }

// Load reads the snapshot. Missing, unreadable or bad snapshots are logged
// in one line and give nil: the wrapper then starts as without one.
func (p *Persister) Load(logger klog.Logger) *Snapshot {
	statefile.RemoveTemps(p.Dir, fileName)
	data, err := statefile.ReadFramed(p.Path(), format, maxBytes)
	var sn *Snapshot
	if err == nil {
		sn, err = p.Codec.Decode(data, p.Node, p.Upstream)
	}
	var se *statefile.Error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		logger.Info("No snapshot to serve before upstream answers", "path", p.Path())
		return nil
	case errors.As(err, &se) && se.Reason == statefile.ReasonPreviousFormat:
		logger.Info("Ignoring snapshot: written by an earlier version in a layout this one does not read; serving once upstream answers, and writing the new layout then",
			"path", p.Path(), "reason", se.Reason)
		return nil
	case errors.As(err, &se):
		logger.Info("Ignoring snapshot", "path", p.Path(), "reason", se.Reason, "err", err)
		return nil
	case err != nil:
		logger.Info("Ignoring snapshot", "path", p.Path(), "reason", statefile.ReasonInvalid, "err", err)
		return nil
	}
	if v := snapshottrust.TooOld(sn.Header.WrittenAt, p.MaxAge, time.Now()); !v.Serve {
		p.Metrics.Refused.WithLabelValues(v.Reason).Inc()
		logger.Info("Ignoring snapshot", "path", p.Path(), "reason", v.Reason, "writtenAt", sn.Header.WrittenAt, "detail", v.Detail)
		return nil
	}
	return sn
}

// MaybeWrite writes a snapshot when something was served since the last
// one, and an unchanged one again only to move its writtenAt on
// (snapshottrust's Stamp.ForWrite): at shutdown (final) or hourly.
func (p *Persister) MaybeWrite(logger klog.Logger, final bool) {
	unchanged := p.Clock.Current() == p.written && !p.lastAsOf.IsZero()
	asOf, write := p.Stamp.ForWrite(unchanged, p.lastAsOf, time.Now(), final)
	if !write {
		p.Metrics.Writes.WithLabelValues("unchanged").Inc()
		return
	}
	p.Write(logger, asOf)
}

// Write collects every source (each consistent in itself, see
// Source.State) and replaces the snapshot file, stamped asOf. A failure
// (full disk, read-only or foreign-owned directory) is logged once per run
// of failures; the wrapper goes on serving from memory and tries again
// later.
func (p *Persister) Write(logger klog.Logger, asOf time.Time) {
	start := time.Now()
	clockAt := p.Clock.Current()
	lists := make([]List, 0, len(p.Sources))
	for _, src := range p.Sources {
		objs, from, at := src.State()
		lists = append(lists, List{Kind: src.Kind, Items: objs,
			Section: Section{Resource: src.Kind.Name, From: from, At: at, Objects: len(objs)}})
	}
	h := Header{NodeName: p.Node, Upstream: p.Upstream, WrittenAt: asOf.UTC()}
	n, err := statefile.WriteFramed(p.Dir, fileName, format, func(w io.Writer) error { return p.Codec.Encode(w, h, lists) })
	if err != nil {
		p.Metrics.Writes.WithLabelValues("failed").Inc()
		if !p.failing {
			logger.Error(err, "Snapshot not written: serving from memory only; a restart while upstream is away would serve nothing until this is fixed",
				"path", p.Path())
		}
		p.failing = true
		p.lastError.Store(err.Error())
		return
	}
	if p.failing {
		logger.Info("Snapshot written again", "path", p.Path())
	}
	p.failing = false
	p.lastError.Store("")
	p.written, p.lastAsOf = clockAt, asOf
	p.Metrics.Writes.WithLabelValues("written").Inc()
	p.Metrics.Bytes.Set(float64(n))
	p.Metrics.WriteSeconds.Set(time.Since(start).Seconds())
	logger.V(4).Info("Snapshot written", "path", p.Path(), "bytes", n, "duration", time.Since(start))
}
