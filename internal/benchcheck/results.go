package benchcheck

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Results are the figures one or more `go test -bench -v` outputs hold:
// per benchmark (without its -GOMAXPROCS suffix) and unit, every value in
// the order printed (one per -count), and the values of the ratio lines
// by name.
type Results struct {
	values map[string]map[string][]float64
	ratios map[string][]float64
	// ratioRun is what the last ratio line of each name says of its run
	// (spread, samples, load, world).
	ratioRun map[string]string
	// Failed are the benchmarks a "--- FAIL:" or "--- SKIP:" line names.
	Failed map[string]string
}

// NewResults returns empty Results.
func NewResults() *Results {
	return &Results{values: map[string]map[string][]float64{}, ratios: map[string][]float64{}, ratioRun: map[string]string{}, Failed: map[string]string{}}
}

var (
	// BenchmarkX/sub-2   1   123 ns/op   4.5 unit ...
	resultLine = regexp.MustCompile(`^(Benchmark\S*?)(?:-\d+)?\s+(\d+)\s+(.+)$`)
	// --- FAIL: BenchmarkX/sub (0.00s)
	endLine = regexp.MustCompile(`^\s*--- (FAIL|SKIP): (Benchmark\S*)`)
)

// Parse adds the figures of one `go test -bench -v` output to r. Lines it does not know are
// skipped: test logs, klog output, the package's ok/FAIL lines.
func (r *Results) Parse(out io.Reader) error {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		r.parseLine(sc.Text())
	}
	return sc.Err()
}

func (r *Results) parseLine(line string) {
	if m := endLine.FindStringSubmatch(line); m != nil {
		r.Failed[m[2]] = m[1]
		return
	}
	if i := strings.Index(line, "ratio name="); i >= 0 {
		r.parseRatio(line[i:])
		return
	}
	// With -v a result line is written whole, from the start of a line;
	// "Benchmark" elsewhere is log text.
	m := resultLine.FindStringSubmatch(strings.TrimRight(line, " \t"))
	if m == nil {
		return
	}
	fields := strings.Fields(m[3])
	if len(fields) < 2 || len(fields)%2 != 0 {
		return
	}
	figures := map[string]float64{}
	for k := 0; k < len(fields); k += 2 {
		v, err := strconv.ParseFloat(fields[k], 64)
		if err != nil {
			return // not a result line after all
		}
		figures[fields[k+1]] = v
	}
	name := m[1]
	if r.values[name] == nil {
		r.values[name] = map[string][]float64{}
	}
	for unit, v := range figures {
		r.values[name][unit] = append(r.values[name][unit], v)
	}
}

// parseRatio reads `ratio name=NAME value=V goal<=X key=value...`.
func (r *Results) parseRatio(line string) {
	var name string
	var run []string
	value, ok := 0.0, false
	for _, f := range strings.Fields(line)[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "name":
			name = v
		case "value":
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				value, ok = x, true
			}
		case "min", "max", "pairs", "runs", "load", "world":
			run = append(run, f)
		}
	}
	if name != "" && ok {
		r.ratios[name] = append(r.ratios[name], value)
		r.ratioRun[name] = strings.Join(run, " ")
	}
}

// Values returns what benchmark reported under metric ("ratio:NAME" for a
// ratio line), one value per run.
func (r *Results) Values(benchmark, metric string) []float64 {
	if name, ok := strings.CutPrefix(metric, "ratio:"); ok {
		return r.ratios[name]
	}
	return r.values[benchmark][metric]
}

// RatioRun is what the last ratio line of name said of its run
// ("min=0.59 max=0.92 pairs=4 load=18.6-20.9 world=direct"), "" without.
func (r *Results) RatioRun(name string) string { return r.ratioRun[name] }

// Metrics lists the units benchmark reported, sorted (for the message of a
// missing figure).
func (r *Results) Metrics(benchmark string) []string {
	var out []string
	for unit := range r.values[benchmark] {
		out = append(out, unit)
	}
	slices.Sort(out)
	return out
}

// Median is the middle value (the mean of the two middle ones for an even
// count), as benchstat summarises -count runs.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
