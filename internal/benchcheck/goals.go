// Package benchcheck holds the benchmarks' quantitative goals: it reads the
// goals table (docs/benchmarks/goals.md), parses `go test -bench` output
// (result lines and the ratio lines some benchmarks print), compares every
// goal with what was measured, and renders the outcome as the table
// docs/benchmarks/ carries. hack/benchcheck runs it (`make bench-check`).
package benchcheck

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Run is one `go test -bench` invocation of the goals table's "Runs" table:
// the benchmarks of one package at the size bench-check measures them.
type Run struct {
	Name string
	// Group is Alone, or the name of the runs it runs beside: runs of one
	// group run at the same time (their goals are counts, bytes and
	// ratios of both sides measured together, not timings).
	Group      string
	Package    string   // e.g. ./wrapper/
	Bench      string   // the -bench pattern
	Benchtime  string   // -benchtime
	Count      int      // -count; a goal reads the median of the runs
	Env        []string // KEY=VALUE, beside the caller's environment
	Timeout    time.Duration
	Why        string // why this size still measures the goal's ratio
	SourceLine int
}

// Goal is one row of the goals table.
type Goal struct {
	Run       string // the Run that measures it
	Benchmark string // full name, sub-benchmarks included, without the -GOMAXPROCS suffix
	// Metric is a unit of the benchmark's result line, or "ratio:NAME" for
	// a ratio line a benchmark prints (`ratio name=NAME value=...`).
	Metric string
	// Baseline, when set, divides Metric: the value compared is Metric over
	// Baseline, both from the same run. "METRIC" is of the same benchmark,
	// "BENCHMARK METRIC" of another one.
	Baseline   Ref
	Op         string // <=, <, >=, >, ==
	Threshold  float64
	Page       string // the docs/benchmarks page that states the goal
	SourceLine int
}

// Ref names one measured figure.
type Ref struct{ Benchmark, Metric string }

func (r Ref) String() string {
	if r.Benchmark == "" {
		return r.Metric
	}
	return r.Benchmark + " " + r.Metric
}

// Name is how the output names a goal.
func (g Goal) Name() string {
	s := g.Benchmark + " " + g.Metric
	if g.Baseline.Metric != "" {
		s += " / " + g.Baseline.String()
	}
	return s
}

// Bound is the goal as it reads, e.g. "<= 1.2".
func (g Goal) Bound() string { return g.Op + " " + formatNumber(g.Threshold) }

// Table is the goals file: its runs and its goals.
type Table struct {
	Runs  []Run
	Goals []Goal
}

// RunByName returns the run of that name.
func (t Table) RunByName(name string) (Run, bool) {
	for _, r := range t.Runs {
		if r.Name == name {
			return r, true
		}
	}
	return Run{}, false
}

// Alone is the group of a run that runs with nothing beside it: a timing
// goal, or a ratio with a per-second term in it.
const Alone = "alone"

var runColumns = []string{"run", "group", "package", "benchmarks", "benchtime", "count", "timeout", "env", "why this size"}
var goalColumns = []string{"run", "benchmark", "metric", "baseline", "goal", "page"}

// ParseTable reads the goals file: markdown with a table whose header is
// runColumns and one whose header is goalColumns (code spans allowed in
// every cell). Everything else in the file is prose for the reader.
func ParseTable(r io.Reader) (Table, error) {
	var t Table
	var kind string // "runs", "goals" or "" outside those tables
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(text, "|") {
			kind = ""
			continue
		}
		cells := splitRow(text)
		switch {
		case kind == "" && sameColumns(cells, runColumns):
			kind = "runs"
			continue
		case kind == "" && sameColumns(cells, goalColumns):
			kind = "goals"
			continue
		case kind == "" || isDelimiterRow(cells):
			continue
		}
		var err error
		switch kind {
		case "runs":
			var run Run
			run, err = parseRun(cells)
			run.SourceLine = line
			t.Runs = append(t.Runs, run)
		case "goals":
			var g Goal
			g, err = parseGoal(cells)
			g.SourceLine = line
			t.Goals = append(t.Goals, g)
		}
		if err != nil {
			return Table{}, fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return Table{}, err
	}
	if len(t.Goals) == 0 {
		return Table{}, fmt.Errorf("no goals table (a table with the columns %s)", strings.Join(goalColumns, " | "))
	}
	seen := map[string]bool{}
	for _, r := range t.Runs {
		if seen[r.Name] {
			return Table{}, fmt.Errorf("line %d: run %q named twice", r.SourceLine, r.Name)
		}
		seen[r.Name] = true
	}
	for _, g := range t.Goals {
		if !seen[g.Run] {
			return Table{}, fmt.Errorf("line %d: goal %s names run %q, which the runs table does not have", g.SourceLine, g.Name(), g.Run)
		}
	}
	return t, nil
}

func parseRun(cells []string) (Run, error) {
	if len(cells) != len(runColumns) {
		return Run{}, fmt.Errorf("a run has %d cells (%s), this row %d", len(runColumns), strings.Join(runColumns, ", "), len(cells))
	}
	r := Run{Name: cells[0], Group: cells[1], Package: cells[2], Bench: cells[3], Benchtime: cells[4], Why: cells[8]}
	if r.Name == "" || r.Group == "" || r.Package == "" || r.Bench == "" || r.Benchtime == "" {
		return Run{}, fmt.Errorf("run %q: run, group, package, benchmarks and benchtime must be set", r.Name)
	}
	if strings.ContainsFunc(r.Group, unicode.IsSpace) {
		return Run{}, fmt.Errorf("run %q: group %q is not one word (%s, or a name the runs beside it share)", r.Name, r.Group, Alone)
	}
	count, err := strconv.Atoi(cells[5])
	if err != nil || count < 1 {
		return Run{}, fmt.Errorf("run %q: count %q is not a positive integer", r.Name, cells[5])
	}
	r.Count = count
	if r.Timeout, err = time.ParseDuration(cells[6]); err != nil || r.Timeout <= 0 {
		return Run{}, fmt.Errorf("run %q: timeout %q is not a positive duration", r.Name, cells[6])
	}
	for _, kv := range strings.Fields(cells[7]) {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return Run{}, fmt.Errorf("run %q: env %q is not KEY=VALUE", r.Name, kv)
		}
		r.Env = append(r.Env, kv)
	}
	return r, nil
}

func parseGoal(cells []string) (Goal, error) {
	if len(cells) != len(goalColumns) {
		return Goal{}, fmt.Errorf("a goal has %d cells (%s), this row %d", len(goalColumns), strings.Join(goalColumns, ", "), len(cells))
	}
	g := Goal{Run: cells[0], Benchmark: cells[1], Metric: cells[2], Page: cells[5]}
	if g.Run == "" || g.Metric == "" || g.Page == "" {
		return Goal{}, fmt.Errorf("goal %q: run, metric and page must be set", g.Benchmark)
	}
	if !strings.HasPrefix(g.Benchmark, "Benchmark") {
		return Goal{}, fmt.Errorf("goal benchmark %q does not start with Benchmark", g.Benchmark)
	}
	if strings.HasPrefix(g.Metric, "ratio:") && cells[3] != "" && cells[3] != "-" {
		return Goal{}, fmt.Errorf("goal %s: a ratio line is already a ratio, it takes no baseline", g.Name())
	}
	switch f := strings.Fields(cells[3]); {
	case len(f) == 0 || (len(f) == 1 && f[0] == "-"):
	case len(f) == 1:
		g.Baseline = Ref{Metric: f[0]}
	case len(f) == 2 && strings.HasPrefix(f[0], "Benchmark"):
		g.Baseline = Ref{Benchmark: f[0], Metric: f[1]}
	default:
		return Goal{}, fmt.Errorf("goal %s: baseline %q is neither METRIC nor BENCHMARK METRIC", g.Name(), cells[3])
	}
	op, threshold, err := parseBound(cells[4])
	if err != nil {
		return Goal{}, fmt.Errorf("goal %s: %w", g.Name(), err)
	}
	g.Op, g.Threshold = op, threshold
	return g, nil
}

// parseBound reads "<= 1.2", ">=1.0", "== 0".
func parseBound(s string) (string, float64, error) {
	s = strings.TrimSpace(s)
	for _, op := range []string{"<=", ">=", "==", "<", ">"} {
		if rest, ok := strings.CutPrefix(s, op); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return "", 0, fmt.Errorf("goal %q: %q is not a number", s, strings.TrimSpace(rest))
			}
			return op, v, nil
		}
	}
	return "", 0, fmt.Errorf("goal %q does not start with <=, <, >=, > or ==", s)
}

// splitRow splits a markdown table row into its cells, trimmed, code spans
// unwrapped. A pipe inside a code span stays in its cell.
func splitRow(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	row = strings.TrimSuffix(row, "|")
	var cells []string
	var cur strings.Builder
	inCode := false
	for i := 0; i < len(row); i++ {
		c := row[i]
		switch {
		case c == '`':
			inCode = !inCode
		case c == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func sameColumns(cells, want []string) bool {
	if len(cells) != len(want) {
		return false
	}
	for i := range cells {
		if !strings.EqualFold(cells[i], want[i]) {
			return false
		}
	}
	return true
}

func isDelimiterRow(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" || c == "" {
			return false
		}
	}
	return true
}
