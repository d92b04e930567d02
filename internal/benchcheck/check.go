package benchcheck

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Status is a goal's outcome.
type Status string

const (
	Met     Status = "met"
	Missed  Status = "MISSED"
	Missing Status = "MISSING" // not measured: the benchmark failed, skipped, or does not print the figure
)

// Outcome is one goal against what was measured.
type Outcome struct {
	Goal   Goal
	Status Status
	Value  float64 // the figure compared (metric over baseline when there is one)
	// Detail says where Value came from ("1.004 = 47,698 / 47,500", the
	// runs' spread) or why it is missing.
	Detail string
}

// Check compares every goal with res. runFailed names the runs whose
// `go test` did not succeed, with why: their goals' missing figures say so.
func Check(goals []Goal, res *Results, runFailed map[string]string) []Outcome {
	out := make([]Outcome, 0, len(goals))
	for _, g := range goals {
		out = append(out, check(g, res, runFailed[g.Run]))
	}
	return out
}

func check(g Goal, res *Results, runErr string) Outcome {
	o := Outcome{Goal: g}
	missing := func(ref Ref) Outcome {
		o.Status = Missing
		why := fmt.Sprintf("%s printed no %s", ref.Benchmark, ref.Metric)
		if name, ok := strings.CutPrefix(ref.Metric, "ratio:"); ok {
			why = fmt.Sprintf("no ratio line %s", name)
		}
		if how, failed := failedAt(res, ref.Benchmark); failed {
			why += fmt.Sprintf(" (%s: %s)", strings.ToLower(how), ref.Benchmark)
		} else if runErr != "" {
			why += " (run " + g.Run + ": " + runErr + ")"
		} else if have := res.Metrics(ref.Benchmark); len(have) > 0 && !strings.HasPrefix(ref.Metric, "ratio:") {
			why += "; it printed " + strings.Join(have, ", ")
		}
		o.Detail = why
		return o
	}
	main := Ref{Benchmark: g.Benchmark, Metric: g.Metric}
	values := res.Values(main.Benchmark, main.Metric)
	if len(values) == 0 {
		return missing(main)
	}
	v := Median(values)
	o.Value, o.Detail = v, spread(values)
	if name, ok := strings.CutPrefix(g.Metric, "ratio:"); ok && len(values) == 1 {
		o.Detail = res.RatioRun(name)
	}
	if g.Baseline.Metric != "" {
		base := g.Baseline
		if base.Benchmark == "" {
			base.Benchmark = g.Benchmark
		}
		bv := res.Values(base.Benchmark, base.Metric)
		if len(bv) == 0 {
			return missing(base)
		}
		b := Median(bv)
		if b == 0 {
			o.Status = Missing
			o.Detail = fmt.Sprintf("baseline %s is 0: no ratio", base)
			return o
		}
		o.Value = v / b
		o.Detail = fmt.Sprintf("%s / %s", formatNumber(v), formatNumber(b))
		if s := spread(values); s != "" {
			o.Detail += ", runs " + s
		}
	}
	if meets(o.Value, g.Op, g.Threshold) {
		o.Status = Met
	} else {
		o.Status = Missed
	}
	return o
}

// failedAt reports whether benchmark, or one above it, failed or skipped.
func failedAt(res *Results, benchmark string) (string, bool) {
	for name := benchmark; name != ""; {
		if how, ok := res.Failed[name]; ok {
			return how, true
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return "", false
}

// spread is "(min-max of N)" for more than one run.
func spread(v []float64) string {
	if len(v) < 2 {
		return ""
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return fmt.Sprintf("median of %d, %s-%s", len(v), formatNumber(lo), formatNumber(hi))
}

func meets(v float64, op string, t float64) bool {
	switch op {
	case "<=":
		return v <= t
	case "<":
		return v < t
	case ">=":
		return v >= t
	case ">":
		return v > t
	case "==":
		return v == t
	}
	return false
}

// Failures lists the goals not met, one line each, naming the goal, what
// was measured and the page: what bench-check prints before exiting 1.
func Failures(outcomes []Outcome) []string {
	var out []string
	for _, o := range outcomes {
		switch o.Status {
		case Missed:
			out = append(out, fmt.Sprintf("goal missed: %s = %s, want %s (%s)", o.Goal.Name(), formatNumber(o.Value), o.Goal.Bound(), o.Goal.Page))
		case Missing:
			out = append(out, fmt.Sprintf("goal not measured: %s, want %s: %s (%s)", o.Goal.Name(), o.Goal.Bound(), o.Detail, o.Goal.Page))
		}
	}
	return out
}

// RenderTable is the outcome as a markdown table, the one the benchmark
// pages carry.
func RenderTable(outcomes []Outcome) string {
	var s strings.Builder
	s.WriteString("| result | benchmark | figure | measured | goal | from | page |\n")
	s.WriteString("| --- | --- | --- | ---: | --- | --- | --- |\n")
	for _, o := range outcomes {
		g := o.Goal
		figure := "`" + g.Metric + "`"
		if g.Baseline.Metric != "" {
			figure += " / `" + g.Baseline.String() + "`"
		}
		measured := "-"
		if o.Status != Missing {
			measured = formatNumber(o.Value)
		}
		result := string(o.Status)
		if o.Status != Met {
			result = "**" + result + "**"
		}
		fmt.Fprintf(&s, "| %s | `%s` | %s | %s | %s | %s | [%s](%s) |\n",
			result, g.Benchmark, figure, measured, g.Bound(), escapeCell(o.Detail), pageTitle(g.Page), pageLink(g.Page))
	}
	return s.String()
}

// pageLink is the page's link from a page in docs/benchmarks/.
func pageLink(page string) string {
	if rest, ok := strings.CutPrefix(page, "docs/benchmarks/"); ok {
		return rest
	}
	return "../../" + page
}

func pageTitle(page string) string {
	page = pageLink(page)
	if i := strings.LastIndex(page, "/"); i >= 0 {
		page = page[i+1:]
	}
	return page
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// formatNumber keeps four significant digits, no exponent, thousands
// separated for large figures.
func formatNumber(v float64) string {
	if math.Abs(v) >= 1000 {
		s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if neg {
			return "-" + b.String()
		}
		return b.String()
	}
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
