package cpuacct

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func TestParseProcessUsage(t *testing.T) {
	// A command name with spaces and parentheses: the fields count from
	// the last ')'. utime 150, stime 50, cutime 12000, cstime 3000 ticks,
	// started 2000 ticks (20 s) after boot, now 620.5 s after boot.
	stat := "4242 (a (b) c) S 1 4242 4242 0 -1 4194304 100 0 0 0 150 50 12000 3000 20 0 1 0 2000 1000 100"
	u, err := parseProcessUsage(stat, "620.50 1234.00\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{User: 121500 * time.Millisecond, System: 30500 * time.Millisecond, Wall: 600500 * time.Millisecond,
		Self: 2 * time.Second}
	if u != want {
		t.Errorf("usage %+v, want %+v", u, want)
	}
	if got := u.CPU(); got != 152*time.Second {
		t.Errorf("CPU %s, want 2m32s", got)
	}
}

func TestParseProcessUsageBadInput(t *testing.T) {
	for name, stat := range map[string]string{
		"no command":   "4242 S 1 2 3",
		"short":        "4242 (sh) S 1 4242 4242 0 -1 4194304 100 0 0 0 150",
		"not a number": "4242 (sh) S 1 4242 4242 0 -1 4194304 100 0 0 0 x 50 12000 3000 20 0 1 0 2000",
	} {
		if _, err := parseProcessUsage(stat, "1.0 2.0"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := parseProcessUsage("1 (sh) S 1 1 1 0 -1 0 0 0 0 0 1 1 1 1 20 0 1 0 5", "up"); err == nil {
		t.Error("bad /proc/uptime: no error")
	}
}

// TestProcessUsageOfSelf reads this process's /proc usage around a spin of
// one thread and compares it with what getrusage(RUSAGE_SELF) says at the
// same moments: the kernel derives both from the same adjusted counters.
// (Compared with the spin itself, RUSAGE_THREAD's precise runtime, the
// tick-sampled figures fell 70ms short of 300ms on a loaded CI machine.)
func TestProcessUsageOfSelf(t *testing.T) {
	self := func() (Usage, time.Duration) {
		u, err := ProcessUsage(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return u, duration(ru.Utime) + duration(ru.Stime)
	}
	before, ruBefore := self()
	runtime.LockOSThread() // RUSAGE_THREAD below
	defer runtime.UnlockOSThread()
	const spin = 300 * time.Millisecond
	thread := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_THREAD, &ru)
		return duration(ru.Utime) + duration(ru.Stime)
	}
	for start := thread(); thread()-start < spin; {
	}
	after, ruAfter := self()
	// /proc counts in hundredths of a second; the two reads are a moment
	// apart.
	cpu, ru := after.CPU()-before.CPU(), ruAfter-ruBefore
	if d := cpu - ru; d < -30*time.Millisecond || d > 30*time.Millisecond {
		t.Errorf("CPU %s -> %s: %s more, getrusage %s more", before.CPU(), after.CPU(), cpu, ru)
	}
	if cpu <= 0 {
		t.Errorf("CPU %s -> %s after a %s spin", before.CPU(), after.CPU(), spin)
	}
	if after.Wall < spin-20*time.Millisecond {
		t.Errorf("wall %s, want at least %s", after.Wall, spin)
	}
}
