package gridhosts

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmarks that hold a goal print one line per goal for a checker
// (issue 43's make bench-check) to read, on standard output:
//
//	ratio name=gridhosts-qps-node-10k value=1.023 goal>=1.0 min=0.91 max=1.12 pairs=8 load=22.1-30.5 world=controllers commit=1adb594 date=2026-11-29T12:00:00Z
//
// name identifies the goal; value is the measured ratio (gridhosts over
// its baseline, the hosts plugin, in the same run); goal is the bound the
// value must meet (">=X" or "<=X"); the fields after it describe the run
// (spread, samples, the machine's load average over it, who made the world,
// the tree's commit, the time) and a checker may ignore them. Fields are
// space-separated key=value pairs; values hold no spaces.

// ratioLine is one such line.
type ratioLine struct {
	Name  string
	Value float64
	Goal  string // ">=1.0" or "<=1.2"
	Extra []string
}

// Met reports whether Value meets Goal.
func (r ratioLine) Met() bool {
	bound, err := strconv.ParseFloat(r.Goal[2:], 64)
	if err != nil {
		return false
	}
	if strings.HasPrefix(r.Goal, ">=") {
		return r.Value >= bound
	}
	return r.Value <= bound
}

func (r ratioLine) String() string {
	fields := append([]string{"ratio", "name=" + r.Name, fmt.Sprintf("value=%.3f", r.Value), "goal" + r.Goal}, r.Extra...)
	return strings.Join(append(fields, "commit="+treeCommit(), "date="+time.Now().UTC().Format(time.RFC3339)), " ")
}

// printRatio prints r for the checker and logs whether it met its goal
// (the benchmark records; it does not fail on a miss).
func printRatio(b *testing.B, r ratioLine) {
	b.Helper()
	fmt.Println(r)
	if !r.Met() {
		b.Logf("goal missed: %s %.3f, want %s", r.Name, r.Value, r.Goal)
	}
}

// sizeName writes a number of names as 1k, 10k (or the number).
func sizeName(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// treeCommit is the commit of the tree the benchmark runs in
// (git describe --always --dirty), "unknown" outside a git work tree.
func treeCommit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// loadRange is the machine's one-minute load average seen over a run.
type loadRange struct{ min, max, latest float64 }

func newLoadRange() *loadRange {
	l := &loadRange{min: math.Inf(1), max: math.Inf(-1)}
	l.sample()
	return l
}

// sample reads /proc/loadavg once.
func (l *loadRange) sample() {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return
	}
	l.min, l.max, l.latest = min(l.min, v), max(l.max, v), v
}

func (l *loadRange) last() string { return fmt.Sprintf("%.1f", l.latest) }

func (l *loadRange) String() string {
	if math.IsInf(l.min, 0) {
		return "unknown"
	}
	return fmt.Sprintf("%.1f-%.1f", l.min, l.max)
}
