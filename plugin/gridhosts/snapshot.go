package gridhosts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/internal/statefile"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

const (
	// defaultSnapshotInterval bounds how often the snapshot is rewritten
	// (only when the index changed, so a quiet grid writes nothing): the
	// wrapper's bound too.
	defaultSnapshotInterval = snapshottrust.DefaultWriteInterval
	minSnapshotInterval     = time.Second
	maxSnapshotInterval     = 24 * time.Hour
)

// snapshotter keeps the on-disk snapshot of one gridhosts block: it writes
// the live index atomically (temporary file, fsync, rename), mode 0600, at
// most once per interval and only when the content changed, and once more
// at shutdown. A failed write (full disk, read-only or foreign-owned
// directory) is logged once as a Warning; serving continues from memory.
type snapshotter struct {
	path     string
	interval time.Duration
	owner    snapOwner

	// life decides whether a snapshot read at start-up is answered from
	// (package snapshottrust's rule, the wrapper's too).
	life *snapshottrust.Life

	mu sync.Mutex // one write at a time: the ticker and shutdown
	// stamp gives each snapshot its time (package snapshottrust's rule,
	// the wrapper's too); its Probe is set once the client is.
	stamp snapshottrust.Stamp
	// identify, when set, asks the apiserver for the snapshot's identity
	// (this block's Node and its UID), once: the header records it.
	identify func(context.Context) (snapshottrust.Identity, error)
	identity snapshottrust.Identity
	lastBody [sha256.Size]byte
	lastAsOf time.Time // the time of the last snapshot written; zero before
	problem  string    // the write failure last logged; "" while writes work
}

// newSnapshotter keeps snapshots at path; one written longer than
// snapshottrust.DefaultMaxAge ago is not answered from (life.MaxAge).
func newSnapshotter(path string, interval time.Duration, owner snapOwner) *snapshotter {
	return &snapshotter{path: path, interval: interval, owner: owner,
		life: &snapshottrust.Life{MaxAge: snapshottrust.DefaultMaxAge, Refused: snapshotsRefused, Age: &servingSnapshotWritten}}
}

// prepare creates the directory if it is missing (0700), removes
// temporary files a crash left behind and checks early that the directory
// is writable, so an unwritable one is reported at start-up rather than at
// the first write.
func (s *snapshotter) prepare() {
	dir, name := filepath.Split(s.path)
	statefile.RemoveTemps(dir, name)
	// Temporary files of builds before package statefile had another name.
	if old, err := filepath.Glob(filepath.Join(dir, "."+name+".tmp-*")); err == nil {
		for _, f := range old {
			os.Remove(f)
		}
	}
	if err := statefile.CheckWritable(dir, name); err != nil {
		s.mu.Lock()
		s.report(err)
		s.mu.Unlock()
	}
}

// write stores x's content, stamped with the last time the apiserver was
// known reachable. Content equal to what was last written is rewritten
// only to advance that time, and the apiserver is probed only for a write
// that may happen (snapshottrust's Stamp.ForWrite).
func (s *snapshotter) write(x *index.Index, final bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, err := gobBytes(bodyOf(x))
	if err != nil {
		return fmt.Errorf("encoding the snapshot: %w", err)
	}
	sum := sha256.Sum256(body)
	unchanged := !s.lastAsOf.IsZero() && sum == s.lastBody
	asOf, write := s.stamp.ForWrite(unchanged, s.lastAsOf, time.Now(), final)
	if !write {
		snapshotUnchanged.Inc()
		return nil
	}
	if s.identity.Node == "" && s.identify != nil {
		ctx, cancel := context.WithTimeout(context.Background(), snapshottrust.ProbeTimeout)
		s.identity, _ = s.identify(ctx) // asked again at the next write when it fails
		cancel()
	}
	dir, name := filepath.Split(s.path)
	_, err = statefile.WriteFramed(dir, name, snapshotFormat, func(w io.Writer) error {
		return encodePayload(w, snapHeader{Owner: s.owner, Written: asOf.UTC(), Identity: s.identity}, body)
	})
	if err != nil {
		snapshotFailed.Inc()
		s.report(err)
		return err
	}
	snapshotWritten.Inc()
	s.lastBody, s.lastAsOf = sum, asOf
	if s.problem != "" {
		s.problem = ""
		klog.Background().WithName(pluginName).Info("Snapshot written again", "path", s.path)
	}
	return nil
}

// report logs a write failure once per distinct cause (the system error:
// temporary file names differ each time), at Warning level. Callers hold
// s.mu.
func (s *snapshotter) report(err error) {
	cause := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		cause = errno.Error()
	}
	if cause != s.problem {
		s.problem = cause
		klog.Warningf("%s: cannot write snapshot %s (answers continue from memory; a restart while the apiserver is away will not find current data): %v", pluginName, s.path, err)
	}
}

// loadSnapshot reads this block's snapshot for start-up. Any reason not to
// use it is one log line; the result is then nil.
func (g *GridHosts) loadSnapshot(logger klog.Logger) (*index.Index, *snapBody, snapHeader) {
	s := g.snapshot
	s.prepare()
	h, b, err := readSnapshot(s.path, s.owner)
	var se *statefile.Error
	switch {
	case errors.As(err, &se) && se.Reason == statefile.ReasonPreviousFormat:
		logger.Info("Snapshot not used: written by an earlier version in a layout this one does not read; answering once the informers sync, and writing the new layout then",
			"path", s.path, "reason", se.Reason)
		return nil, nil, snapHeader{}
	case errors.As(err, &se):
		logger.Info("Snapshot not used", "path", s.path, "reason", se.Reason, "err", err)
		return nil, nil, snapHeader{}
	case err != nil:
		logger.Info("Snapshot not used", "path", s.path, "err", err)
		return nil, nil, snapHeader{}
	}
	return b.index(g.nodeMode()), b, h
}

// serveSnapshot answers from x (read from a snapshot written at written)
// until the informers are known, unless they already are.
func (g *GridHosts) serveSnapshot(logger klog.Logger, x *index.Index, h snapHeader) {
	g.mode.Lock()
	defer g.mode.Unlock()
	if g.synced.Load() || !g.snapshot.life.Serve(h.Written) {
		return
	}
	g.snap.Store(x)
	snapshotServing.Set(1)
	n := x.Counts()
	logger.Info("Apiserver not synced: answering grid names from the snapshot until it is",
		"path", g.snapshot.path, "written", h.Written.Format(time.RFC3339), "age", time.Since(h.Written).Round(time.Second).String(),
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
	g.snapshot.life.Confirm()
	snapshotServing.Set(0)
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
	wait.UntilWithContext(ctx, func(context.Context) { g.snapshot.write(g.index, false) }, g.snapshot.interval)
}
