package snapshot

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

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/internal/statefile"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// logName names the plugin in the writer's log lines.
const logName = "gridhosts"

// Writer keeps the on-disk snapshot of one gridhosts block: it writes the
// live index atomically (temporary file, fsync, rename), mode 0600, at most
// once per Interval (its caller's ticker) and only when the content changed,
// and once more at shutdown. A failed write (full disk, read-only or
// foreign-owned directory) is logged once as a Warning; serving continues
// from memory.
type Writer struct {
	Path     string
	Interval time.Duration
	Owner    Owner

	// Life decides whether a snapshot read at start-up is answered from
	// (package snapshottrust's rule, the wrapper's too).
	Life *snapshottrust.Life

	// Stamp gives each snapshot its time (package snapshottrust's rule,
	// the wrapper's too); its Probe is set, before the first Write, once
	// there is a client.
	Stamp snapshottrust.Stamp
	// Identify, when set before the first Write, asks the apiserver for the
	// snapshot's identity (this block's Node and its UID), once: the header
	// records it.
	Identify func(context.Context) (snapshottrust.Identity, error)

	mu       sync.Mutex // one write at a time: the ticker and shutdown
	identity snapshottrust.Identity
	lastBody [sha256.Size]byte
	lastAsOf time.Time // the time of the last snapshot written; zero before
	problem  string    // the write failure last logged; "" while writes work
}

// NewWriter keeps owner's snapshots at path; one written longer than
// snapshottrust.DefaultMaxAge ago is not answered from (Life.MaxAge).
func NewWriter(path string, interval time.Duration, owner Owner) *Writer {
	return &Writer{Path: path, Interval: interval, Owner: owner,
		Life: &snapshottrust.Life{MaxAge: snapshottrust.DefaultMaxAge, Refused: refused, Age: &servingWritten}}
}

// Prepare creates the directory if it is missing (0700), removes
// temporary files a crash left behind and checks early that the directory
// is writable, so an unwritable one is reported at start-up rather than at
// the first write.
func (s *Writer) Prepare() {
	dir, name := filepath.Split(s.Path)
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

// Write stores x's content, stamped with the last time the apiserver was
// known reachable. Content equal to what was last written is rewritten
// only to advance that time, and the apiserver is probed only for a write
// that may happen (snapshottrust's Stamp.ForWrite).
func (s *Writer) Write(x *index.Index, final bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, err := gobBytes(bodyOf(x))
	if err != nil {
		return fmt.Errorf("encoding the snapshot: %w", err)
	}
	sum := sha256.Sum256(body)
	unchanged := !s.lastAsOf.IsZero() && sum == s.lastBody
	asOf, write := s.Stamp.ForWrite(unchanged, s.lastAsOf, time.Now(), final)
	if !write {
		wroteNone.Inc()
		return nil
	}
	if s.identity.Node == "" && s.Identify != nil {
		ctx, cancel := context.WithTimeout(context.Background(), snapshottrust.ProbeTimeout)
		s.identity, _ = s.Identify(ctx) // asked again at the next write when it fails
		cancel()
	}
	dir, name := filepath.Split(s.Path)
	_, err = statefile.WriteFramed(dir, name, Format, func(w io.Writer) error {
		return encodePayload(w, Header{Owner: s.Owner, Written: asOf.UTC(), Identity: s.identity}, body)
	})
	if err != nil {
		writeFail.Inc()
		s.report(err)
		return err
	}
	wroteNew.Inc()
	s.lastBody, s.lastAsOf = sum, asOf
	if s.problem != "" {
		s.problem = ""
		klog.Background().WithName(logName).Info("Snapshot written again", "path", s.Path)
	}
	return nil
}

// report logs a write failure once per distinct cause (the system error:
// temporary file names differ each time), at Warning level. Callers hold
// s.mu.
func (s *Writer) report(err error) {
	cause := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		cause = errno.Error()
	}
	if cause != s.problem {
		s.problem = cause
		klog.Warningf("%s: cannot write snapshot %s (answers continue from memory; a restart while the apiserver is away will not find current data): %v", logName, s.Path, err)
	}
}
