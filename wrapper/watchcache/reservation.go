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

// Reservation persists the high-water mark of an own clock's
// resourceVersions.
type Reservation struct {
	dir string

	mu       sync.Mutex
	reserved uint64 // versions up to this may be handed out
	failing  bool   // the last write failed (logged once per run of failures)
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
	r := &Reservation{dir: dir}
	r.cover(start)
	return r
}

// cover makes sure v is reserved on disk, extending the reservation by a
// step when it is not. A write that fails is logged and serving goes on
// (as without a state directory: the clock alone); it is retried with the
// next version beyond the reservation.
func (r *Reservation) cover(v uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v <= r.reserved {
		return
	}
	upTo := v + reservationStep
	if err := r.write(upTo); err != nil {
		if !r.failing {
			klog.Background().Error(err, "ResourceVersion reservation not written: versions may repeat after a crash and a clock step back", "dir", r.dir)
		}
		r.failing = true
		return
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
