// Package benchrecord has a benchmark print its own measurement record: a
// ready-to-paste "Latest result" block for its page in docs/benchmarks/
// (date, commit, Go version, GOMAXPROCS, machine load, the command that
// re-runs it and its figures). With SG_BENCH_RECORD=1 it also writes the
// block into the page between markers named after the benchmark.
package benchrecord

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvWrite names the environment variable that makes a benchmark write its
// block into its page.
const EnvWrite = "SG_BENCH_RECORD"

// Figure is one measured value of a benchmark.
type Figure struct {
	Name  string
	Value float64
	Unit  string
}

// Record collects one benchmark run's figures and prints them when the
// benchmark's round ends.
type Record struct {
	b         *testing.B
	page      string
	start     time.Time
	loadStart string

	mu      sync.Mutex
	figures []Figure
}

// Start begins the record of benchmark b for page (a path from the
// repository root, e.g. "docs/benchmarks/wrapper-fleet.md"). The block is
// printed, and written when asked, in b's cleanup.
func Start(b *testing.B, page string) *Record {
	r := &Record{b: b, page: page, start: time.Now().UTC(), loadStart: LoadAverage()}
	b.Cleanup(r.finish)
	return r
}

// Figure records a value under name (replacing an earlier one of that name).
func (r *Record) Figure(name string, value float64, unit string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.figures {
		if r.figures[i].Name == name {
			r.figures[i] = Figure{name, value, unit}
			return
		}
	}
	r.figures = append(r.figures, Figure{name, value, unit})
}

// Report is b.ReportMetric that also records the value, named by its unit.
func (r *Record) Report(value float64, unit string) {
	r.b.ReportMetric(value, unit)
	r.Figure(unit, value, unit)
}

// ReportOn is sub.ReportMetric for a sub-benchmark of the recorded one; the
// figure is named by sub's name below the recorded benchmark's and the unit.
func (r *Record) ReportOn(sub *testing.B, value float64, unit string) {
	sub.ReportMetric(value, unit)
	r.Figure(r.subName(sub)+" "+unit, value, unit)
}

// PerOp records sub's time per operation when sub ends, named by sub's
// name below the recorded benchmark's (for sub-benchmarks measured by
// the testing package's own ns/op rather than a metric).
func (r *Record) PerOp(sub *testing.B) {
	sub.Cleanup(func() {
		if sub.N == 0 {
			return
		}
		r.Figure(r.subName(sub)+" ns/op", float64(sub.Elapsed().Nanoseconds())/float64(sub.N), "ns/op")
	})
}

func (r *Record) subName(sub *testing.B) string {
	return strings.TrimPrefix(strings.TrimPrefix(sub.Name(), r.b.Name()), "/")
}

func (r *Record) finish() {
	if r.b.Failed() || r.b.Skipped() {
		return
	}
	root, pkg := repoPackage()
	r.mu.Lock()
	figures := append([]Figure(nil), r.figures...)
	r.mu.Unlock()
	block := Render(Result{
		Name:      r.b.Name(),
		Date:      r.start,
		Commit:    Commit(root),
		GoVersion: runtime.Version(),
		MaxProcs:  runtime.GOMAXPROCS(0),
		LoadStart: r.loadStart,
		LoadEnd:   LoadAverage(),
		Command:   Command(r.b.Name(), pkg, testFlags()),
		Iter:      r.b.N,
		Figures:   figures,
	})
	r.b.Logf("record for %s:\n%s", r.page, block)
	if os.Getenv(EnvWrite) != "1" {
		return
	}
	if root == "" {
		r.b.Errorf("%s=1: no repository root found to write %s", EnvWrite, r.page)
		return
	}
	path := filepath.Join(root, r.page)
	old, err := os.ReadFile(path)
	if err != nil {
		r.b.Errorf("%s=1: %v", EnvWrite, err)
		return
	}
	if err := os.WriteFile(path, []byte(ReplaceBlock(string(old), r.b.Name(), block)), 0o644); err != nil {
		r.b.Errorf("%s=1: %v", EnvWrite, err)
	}
}

// Result is everything one block states.
type Result struct {
	Name      string
	Date      time.Time
	Commit    string
	GoVersion string
	MaxProcs  int
	LoadStart string
	LoadEnd   string
	Command   string
	Iter      int
	Figures   []Figure
}

// Render writes res as the markdown block for a benchmark's page.
func Render(res Result) string {
	var s strings.Builder
	s.WriteString("### Latest result\n\n")
	fmt.Fprintf(&s, "- Benchmark: `%s`, b.N=%d\n", res.Name, res.Iter)
	fmt.Fprintf(&s, "- Date: %s\n", res.Date.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&s, "- Commit: `%s`\n", res.Commit)
	fmt.Fprintf(&s, "- Go: %s, GOMAXPROCS=%d\n", res.GoVersion, res.MaxProcs)
	fmt.Fprintf(&s, "- Load average (1, 5, 15 min): %s at start, %s at end\n", res.LoadStart, res.LoadEnd)
	fmt.Fprintf(&s, "- Command: `%s`\n", res.Command)
	if len(res.Figures) > 0 {
		s.WriteString("\n| Figure | Value | Unit |\n|---|---:|---|\n")
		for _, f := range res.Figures {
			fmt.Fprintf(&s, "| %s | %s | %s |\n", f.Name, formatValue(f.Value), f.Unit)
		}
	}
	return s.String()
}

// formatValue keeps four significant digits, without exponents for the
// sizes benchmarks print.
func formatValue(v float64) string {
	if v == float64(int64(v)) || v >= 1000 || v <= -1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// Markers return the comment lines that enclose name's block in a page.
func Markers(name string) (start, end string) {
	return "<!-- benchrecord:start " + name + " -->", "<!-- benchrecord:end " + name + " -->"
}

// ReplaceBlock puts block between name's markers in page, replacing what
// was there, or appends the markers and block at the end of the page.
func ReplaceBlock(page, name, block string) string {
	start, end := Markers(name)
	wrapped := start + "\n" + strings.TrimRight(block, "\n") + "\n" + end
	i := strings.Index(page, start)
	if i >= 0 {
		if j := strings.Index(page[i:], end); j >= 0 {
			return page[:i] + wrapped + page[i+j+len(end):]
		}
	}
	if page != "" && !strings.HasSuffix(page, "\n") {
		page += "\n"
	}
	if page != "" {
		page += "\n"
	}
	return page + wrapped + "\n"
}

// Flag is one test flag as set on the command line.
type Flag struct{ Name, Value string }

// Command is the go test command that re-runs the benchmark named name
// (b.Name(), sub-benchmarks included) in package directory pkg (from the
// repository root) with the flags given.
func Command(name, pkg string, flags []Flag) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := "go test -run '^$' -bench '" + strings.Join(parts, "/") + "'"
	for _, f := range flags {
		if f.Value == "true" {
			cmd += " -" + f.Name
		} else {
			cmd += " -" + f.Name + "=" + f.Value
		}
	}
	if pkg == "" || pkg == "." {
		return cmd + " ."
	}
	return cmd + " ./" + filepath.ToSlash(pkg) + "/"
}

// goTestTimeout is the -timeout the go command passes when none is given.
const goTestTimeout = "10m0s"

// testFlags lists the benchmark-relevant test flags set away from their
// defaults.
func testFlags() []Flag {
	var out []Flag
	for _, name := range []string{"benchtime", "count", "cpu", "benchmem", "timeout", "v"} {
		f := flag.Lookup("test." + name)
		if f == nil {
			continue
		}
		v := f.Value.String()
		switch {
		case name == "v" && v == "false":
		case name == "timeout" && v == goTestTimeout:
		case name == "benchtime" || v != f.DefValue:
			out = append(out, Flag{name, v})
		}
	}
	return out
}

// repoPackage returns the repository root and the test's package directory
// below it (tests run in their package directory); "" when not in a
// repository.
func repoPackage() (root, pkg string) {
	wd, err := os.Getwd()
	if err != nil {
		return "", ""
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil {
				return dir, ""
			}
			return dir, rel
		}
		if filepath.Dir(dir) == dir {
			return "", ""
		}
	}
}

// Commit is the short commit of root's checkout, with "-dirty" when the
// work tree has changes; "unknown" without git.
func Commit(root string) string {
	if root == "" {
		return "unknown"
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(head))
	if status, err := exec.Command("git", "-C", root, "status", "--porcelain").Output(); err == nil && len(strings.TrimSpace(string(status))) > 0 {
		c += "-dirty"
	}
	return c
}

// LoadAverage is the 1, 5 and 15 minute load average from /proc/loadavg.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
