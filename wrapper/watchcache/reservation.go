package watchcache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/statefile"
)

// The wall clock alone cannot keep resourceVersions increasing across
// restarts: stepped back (NTP, an RTC without battery on an edge device)
// after a crash, a new process would hand out again numbers the previous one
// served after its last snapshot, and a watcher resuming from one of them
// would silently miss events. So the highest version a process may hand out
// is reserved on disk, durably, before any version beyond it is handed out,
// and the next process starts above it whatever the clock says.

// ReservationFile holds the reservation inside the state directory.
const ReservationFile = "resourceversion"

// reservationStep is how many versions one reservation write covers: one
// fsync per this many changes.
const reservationStep = 1 << 20

// Retries of a failed reservation write: a failing disk (or one whose
// writes hang) is tried again at most this often, not on every change: the
// write runs under the store's lock.
const (
	reservationRetryMin = time.Second
	reservationRetryMax = time.Minute
)

// Reservation persists the high-water mark of an own clock's
// resourceVersions.
type Reservation struct {
	dir string

	mu       sync.Mutex
	reserved uint64 // versions up to this may be handed out
	failing  bool   // the last write failed (logged once per run of failures)
	retry    time.Duration
	nextTry  time.Time // no write before this while failing
	now      func() time.Time
	writeTo  func(upTo uint64) error
}

// LoadReservation reads the reservation in dir (0 when there is none). An
// unreadable or corrupt file is an error: starting below it could reuse
// versions.
func LoadReservation(dir string) (uint64, error) {
	b, err := statefile.Read(filepath.Join(dir, ReservationFile), 64) // a decimal uint64 and a newline
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: not a resourceVersion: %w", filepath.Join(dir, ReservationFile), err)
	}
	return v, nil
}

// NewReservation reserves versions in dir from start on: the start version
// itself is served (lists of an unchanged store), so it is reserved at once.
func NewReservation(dir string, start uint64) *Reservation {
	r := &Reservation{dir: dir, now: time.Now}
	r.writeTo = r.write
	r.cover(start)
	return r
}

// cover makes sure v is reserved on disk, extending the reservation by a
// step when it is not. A write that fails is logged and serving goes on
// (as without a state directory: the clock alone); it is retried with a
// version beyond the reservation once its backoff (1 s, doubling up to a
// minute) has passed.
func (r *Reservation) cover(v uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v <= r.reserved {
		return
	}
	now := r.now()
	if r.failing && now.Before(r.nextTry) {
		return
	}
	upTo := v + reservationStep
	if err := r.writeTo(upTo); err != nil {
		if !r.failing {
			klog.Background().Error(err, "ResourceVersion reservation not written: versions may repeat after a crash and a clock step back; retried with backoff", "dir", r.dir)
			r.retry = reservationRetryMin
		} else if r.retry *= 2; r.retry > reservationRetryMax {
			r.retry = reservationRetryMax
		}
		r.failing = true
		r.nextTry = r.now().Add(r.retry)
		return
	}
	if r.failing {
		klog.Background().Info("ResourceVersion reservation written again", "dir", r.dir)
	}
	r.failing = false
	r.reserved = upTo
}

func (r *Reservation) write(upTo uint64) error {
	_, err := statefile.WriteAtomic(r.dir, ReservationFile, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%d\n", upTo)
		return err
	})
	return err
}
