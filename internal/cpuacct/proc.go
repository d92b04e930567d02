package cpuacct

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc's times: fixed at 100 per second in the
// kernel's ABI, whatever the kernel's own tick.
const userHZ = 100

// ProcessUsage is the usage of process pid so far: its own CPU time (Self)
// and that of every child it has waited for (which includes theirs), and
// the wall time since it started. For a shell script that waits for what it
// starts, that is the whole run up to now.
func ProcessUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	uptime, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return Usage{}, err
	}
	return parseProcessUsage(string(stat), string(uptime))
}

// parseProcessUsage reads proc(5)'s /proc/PID/stat and /proc/uptime.
func parseProcessUsage(stat, uptime string) (Usage, error) {
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses itself: the fields after it start after the last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("/proc/PID/stat %q: no command name", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state); utime, stime, cutime, cstime are fields
	// 14-17, starttime field 22.
	field := func(n int) (int64, error) {
		if n-3 >= len(fields) {
			return 0, fmt.Errorf("/proc/PID/stat has %d fields, want %d", len(fields)+2, n)
		}
		v, err := strconv.ParseInt(fields[n-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/stat field %d: %w", n, err)
		}
		return v, nil
	}
	var ticks [5]int64
	for k, n := range []int{14, 15, 16, 17, 22} {
		v, err := field(n)
		if err != nil {
			return Usage{}, err
		}
		ticks[k] = v
	}
	up, _, _ := strings.Cut(strings.TrimSpace(uptime), " ")
	upSeconds, err := strconv.ParseFloat(up, 64)
	if err != nil {
		return Usage{}, fmt.Errorf("/proc/uptime %q: %w", uptime, err)
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }
	wall := time.Duration(upSeconds*float64(time.Second)) - tick(ticks[4])
	return Usage{
		User:   tick(ticks[0] + ticks[2]),
		System: tick(ticks[1] + ticks[3]),
		Wall:   max(wall, 0),
		Self:   tick(ticks[0] + ticks[1]),
	}, nil
}
