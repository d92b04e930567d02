package watchcache

import (
	"errors"
	"testing"
	"time"
)

// A failing disk is not written on every change (the write runs under the
// store's lock): after a failure the next try waits 1 s, then 2 s, ... up to
// a minute; a success reserves again and resets the backoff.
func TestReservationBacksOffAFailingDisk(t *testing.T) {
	now := time.Unix(1000, 0)
	var writes int
	failing := true
	r := &Reservation{dir: t.TempDir(), now: func() time.Time { return now }}
	r.writeTo = func(uint64) error {
		writes++
		if failing {
			return errors.New("input/output error")
		}
		return nil
	}
	v := uint64(1)
	changes := func(n int) {
		for range n {
			r.cover(v)
			v++
		}
	}
	changes(1000)
	if writes != 1 {
		t.Fatalf("1000 changes on a failing disk: %d writes, want 1", writes)
	}
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		now = now.Add(wait - time.Millisecond)
		changes(100)
		if writes != 1 {
			t.Fatalf("a retry before its backoff (%s) ran out", wait)
		}
		now = now.Add(time.Millisecond)
		changes(100)
		if writes != 2 {
			t.Fatalf("no retry once the backoff (%s) ran out: %d writes", wait, writes)
		}
		writes = 1
	}
	for range 10 {
		now = now.Add(time.Hour)
		changes(1)
	}
	if r.retry != reservationRetryMax {
		t.Fatalf("backoff %s, want at most %s", r.retry, reservationRetryMax)
	}
	failing = false
	now = now.Add(time.Hour)
	changes(1)
	if r.failing || r.reserved < v {
		t.Fatalf("a write that succeeds does not reserve: failing %v, reserved %d, version %d", r.failing, r.reserved, v)
	}
	writes = 0
	changes(1000)
	if writes != 0 {
		t.Fatalf("%d writes within a reservation step", writes)
	}
}

// The reservation on a real directory: written, read back by the next
// process, never below what was handed out.
func TestReservationOnDisk(t *testing.T) {
	dir := t.TempDir()
	r := NewReservation(dir, 42)
	r.cover(43)
	got, err := LoadReservation(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got < 43 {
		t.Fatalf("reserved %d on disk, below the version 43 handed out", got)
	}
}
