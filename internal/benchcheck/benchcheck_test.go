package benchcheck

import (
	"os"
	"slices"
	"strings"
	"testing"
)

const goalsDoc = `# Goals

Prose is skipped.

| run | group | package | benchmarks | benchtime | count | timeout | env | why this size |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| site | ` + "`counts`" + ` | ` + "`./wrapper/`" + ` | ` + "`^(BenchmarkA\\|BenchmarkB)$`" + ` | 2x | 3 | 10m | ` + "`SG_A=1 SG_B=x,y`" + ` | because |

| run | benchmark | metric | baseline | goal | page |
| --- | --- | --- | --- | --- | --- |
| site | ` + "`BenchmarkSiteStream/nodes=20`" + ` | ` + "`site/one-direct`" + ` | | <= 1.1 | docs/benchmarks/sitestream-bytes.md |
| site | BenchmarkFleet | wrapper-B/a-Service-change | direct-B/a-Service-change | <=1.01 | docs/benchmarks/wrapper-fleet.md |
| site | BenchmarkHandlerModes/10000/gridhosts-node | allocs/op | BenchmarkHandlerModes/10000/hosts allocs/op | <= 1.0 | docs/benchmarks/gridhosts-qps.md |
| site | BenchmarkMemory | ratio:gridhosts-rss-10k | - | <= 1.2 | docs/benchmarks/gridhosts-memory.md |
| site | BenchmarkReconnectStorm | relists-behind-wrapper | | == 0 | docs/benchmarks/wrapper-reconnect-storm.md |
| site | BenchmarkWatchLatency/http2-tls/json | added-p99-µs | | <= 1000 | docs/benchmarks/wrapper-watch-latency.md |
`

func TestParseTable(t *testing.T) {
	table, err := ParseTable(strings.NewReader(goalsDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Runs) != 1 {
		t.Fatalf("runs: %+v", table.Runs)
	}
	r := table.Runs[0]
	if r.Name != "site" || r.Group != "counts" || r.Package != "./wrapper/" || r.Bench != "^(BenchmarkA|BenchmarkB)$" || r.Benchtime != "2x" || r.Count != 3 ||
		r.Timeout.String() != "10m0s" || !slices.Equal(r.Env, []string{"SG_A=1", "SG_B=x,y"}) || r.Why != "because" {
		t.Errorf("run: %+v", r)
	}
	if len(table.Goals) != 6 {
		t.Fatalf("goals: %d, want 6", len(table.Goals))
	}
	g := table.Goals[0]
	if g.Benchmark != "BenchmarkSiteStream/nodes=20" || g.Metric != "site/one-direct" || g.Baseline != (Ref{}) || g.Op != "<=" || g.Threshold != 1.1 ||
		g.Page != "docs/benchmarks/sitestream-bytes.md" || g.SourceLine != 11 {
		t.Errorf("goal 0: %+v", g)
	}
	if g := table.Goals[1]; g.Baseline != (Ref{Metric: "direct-B/a-Service-change"}) || g.Op != "<=" || g.Threshold != 1.01 {
		t.Errorf("goal 1: %+v", g)
	}
	if g := table.Goals[2]; g.Baseline != (Ref{Benchmark: "BenchmarkHandlerModes/10000/hosts", Metric: "allocs/op"}) {
		t.Errorf("goal 2: %+v", g)
	}
	if g := table.Goals[3]; g.Baseline != (Ref{}) || g.Metric != "ratio:gridhosts-rss-10k" {
		t.Errorf("goal 3: %+v", g)
	}
	if g := table.Goals[4]; g.Op != "==" || g.Threshold != 0 {
		t.Errorf("goal 4: %+v", g)
	}
}

func TestParseTableErrors(t *testing.T) {
	head := "| run | benchmark | metric | baseline | goal | page |\n| --- | --- | --- | --- | --- | --- |\n"
	runs := "| run | group | package | benchmarks | benchtime | count | timeout | env | why this size |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" +
		"| r | alone | ./x/ | ^B$ | 1x | 1 | 1m | | why |\n\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"no goals", "# nothing\n", "no goals table"},
		{"bad bound", runs + head + "| r | BenchmarkX | m | | about 1 | p.md |\n", `line 7: goal BenchmarkX m: goal "about 1" does not start with`},
		{"bad number", runs + head + "| r | BenchmarkX | m | | <= one | p.md |\n", `"one" is not a number`},
		{"unknown run", runs + head + "| other | BenchmarkX | m | | <= 1 | p.md |\n", `names run "other", which the runs table does not have`},
		{"short row", runs + head + "| r | BenchmarkX | m | <= 1 | p.md |\n", "a goal has 6 cells"},
		{"not a benchmark", runs + head + "| r | TestX | m | | <= 1 | p.md |\n", `"TestX" does not start with Benchmark`},
		{"bad baseline", runs + head + "| r | BenchmarkX | m | a b c | <= 1 | p.md |\n", `baseline "a b c" is neither`},
		{"ratio with baseline", runs + head + "| r | BenchmarkX | ratio:x | y | <= 1 | p.md |\n", "takes no baseline"},
		{"no page", runs + head + "| r | BenchmarkX | m | | <= 1 | |\n", "page must be set"},
		{"bad count", strings.Replace(runs, "| 1x | 1 |", "| 1x | 0 |", 1) + head, `count "0" is not a positive integer`},
		{"bad timeout", strings.Replace(runs, "| 1m |", "| soon |", 1) + head, `timeout "soon"`},
		{"bad env", strings.Replace(runs, "| | why |", "| NOEQUALS | why |", 1) + head, `env "NOEQUALS" is not KEY=VALUE`},
		{"no group", strings.Replace(runs, "| alone |", "| |", 1) + head, `run "r": run, group, package`},
		{"group of two words", strings.Replace(runs, "| alone |", "| two words |", 1) + head, `group "two words" is not one word`},
		{"run twice", strings.TrimSuffix(runs, "\n") + strings.SplitAfter(runs, "\n")[2] + "\n" + head + "| r | BenchmarkX | m | | <= 1 | p.md |\n", `run "r" named twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTable(strings.NewReader(tc.doc))
			if err == nil {
				t.Fatalf("no error")
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// The repository's own goals file parses and every goal names a page that
// exists.
func TestGoalsFile(t *testing.T) {
	f, err := os.Open("../../docs/benchmarks/goals.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table, err := ParseTable(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range table.Goals {
		if _, err := os.Stat("../../" + g.Page); err != nil {
			t.Errorf("goal %s (line %d): page: %v", g.Name(), g.SourceLine, err)
		}
	}
	for _, r := range table.Runs {
		if !slices.ContainsFunc(table.Goals, func(g Goal) bool { return g.Run == r.Name }) {
			t.Errorf("run %s (line %d) holds no goal", r.Name, r.SourceLine)
		}
	}
	// The timing goals run with nothing beside them (goals.md, "Which runs
	// run together").
	for _, name := range []string{"latency", "gridhosts", "sitestream", "snapshot"} {
		if r, ok := table.RunByName(name); !ok || r.Group != Alone {
			t.Errorf("run %s: group %q, want %s", name, r.Group, Alone)
		}
	}
}

// Output as go test -bench -v prints it: logs, klog lines, a ratio line,
// two -count runs of one benchmark, a failed and a skipped benchmark.
const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/servicegroup/servicegroup/wrapper
cpu: AMD EPYC
BenchmarkSiteStream
BenchmarkSiteStream/nodes=20
    sitestream_bench_test.go:40: record for docs/benchmarks/sitestream-bytes.md:
        - Benchmark: ` + "`BenchmarkSiteStream/nodes=20`" + `, b.N=2
        - Command: ` + "`go test -run '^$' -bench '^BenchmarkSiteStream$' -benchtime=2x ./wrapper/`" + `
BenchmarkSiteStream/nodes=20-2         	       2	 812345678 ns/op	       604.0 direct-quiet-B/s	     47698 site-unit-B/op	         1.004 site/one-direct
I1129 18:00:00.000000   12345 reflector.go:100] "Watch close" BenchmarkFake 1 2 x
BenchmarkFleet-2   	       1	90000000000 ns/op	      1889 direct-B/a-Service-change	      1898 wrapper-B/a-Service-change	0 direct-B/another-node's-status-report
ratio name=gridhosts-rss-10k value=1.180 goal<=1.2 min=1.16 max=1.20 runs=3 load=2.1-3.0 world=controllers commit=abc date=2026-11-29T12:00:00Z
E1129 noise	ratio name=gridhosts-qps-node-10k value=0.970 goal>=1.0 pairs=4
BenchmarkWatchLatency/http2-tls/json-2 	    1000	   1000 ns/op	 900.0 added-p99-µs
BenchmarkWatchLatency/http2-tls/json-2 	    1000	   1000 ns/op	 1200 added-p99-µs
BenchmarkWatchLatency/http2-tls/json-2 	    1000	   1000 ns/op	 950.0 added-p99-µs
BenchmarkHandlerModes/10000/gridhosts-node-2	  200000	      3000 ns/op	     500 B/op	      11 allocs/op
BenchmarkHandlerModes/10000/hosts-2         	  200000	      3300 ns/op	     608 B/op	      13 allocs/op
--- FAIL: BenchmarkQuietForeignChanges
    quiet_bench_test.go:130: something broke
--- SKIP: BenchmarkDNSPerf
PASS
ok  	github.com/servicegroup/servicegroup/wrapper	120.5s
`

func parsed(t *testing.T) *Results {
	t.Helper()
	res := NewResults()
	if err := res.Parse(strings.NewReader(benchOutput)); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestParseResults(t *testing.T) {
	res := parsed(t)
	for _, tc := range []struct {
		bench, metric string
		want          []float64
	}{
		{"BenchmarkSiteStream/nodes=20", "site/one-direct", []float64{1.004}},
		{"BenchmarkSiteStream/nodes=20", "site-unit-B/op", []float64{47698}},
		{"BenchmarkSiteStream/nodes=20", "ns/op", []float64{812345678}},
		{"BenchmarkFleet", "wrapper-B/a-Service-change", []float64{1898}},
		{"BenchmarkFleet", "direct-B/another-node's-status-report", []float64{0}},
		{"BenchmarkWatchLatency/http2-tls/json", "added-p99-µs", []float64{900, 1200, 950}},
		{"BenchmarkHandlerModes/10000/hosts", "allocs/op", []float64{13}},
		{"BenchmarkAnything", "ratio:gridhosts-rss-10k", []float64{1.18}},
		{"", "ratio:gridhosts-qps-node-10k", []float64{0.97}},
		{"BenchmarkFake", "x", nil},
		{"BenchmarkSiteStream", "site/one-direct", nil},
	} {
		if got := res.Values(tc.bench, tc.metric); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s = %v, want %v", tc.bench, tc.metric, got, tc.want)
		}
	}
	if res.Failed["BenchmarkQuietForeignChanges"] != "FAIL" || res.Failed["BenchmarkDNSPerf"] != "SKIP" {
		t.Errorf("failed: %v", res.Failed)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{900, 1200, 950}, 950}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	res := parsed(t)
	goal := func(bench, metric string, base Ref, op string, threshold float64) Goal {
		return Goal{Run: "r", Benchmark: bench, Metric: metric, Baseline: base, Op: op, Threshold: threshold, Page: "docs/benchmarks/p.md"}
	}
	goals := []Goal{
		goal("BenchmarkSiteStream/nodes=20", "site/one-direct", Ref{}, "<=", 1.1),
		goal("BenchmarkFleet", "wrapper-B/a-Service-change", Ref{Metric: "direct-B/a-Service-change"}, "<=", 1.0),
		goal("BenchmarkFleet", "wrapper-B/a-Service-change", Ref{Metric: "direct-B/a-Service-change"}, "<=", 1.01),
		goal("BenchmarkHandlerModes/10000/gridhosts-node", "allocs/op", Ref{"BenchmarkHandlerModes/10000/hosts", "allocs/op"}, "<=", 1.0),
		goal("BenchmarkWatchLatency/http2-tls/json", "added-p99-µs", Ref{}, "<=", 1000),
		goal("BenchmarkMemory", "ratio:gridhosts-rss-10k", Ref{}, "<=", 1.2),
		goal("BenchmarkDNSPerf", "ratio:gridhosts-qps-node-10k", Ref{}, ">=", 1.0),
		goal("BenchmarkReconnectStorm", "relists-behind-wrapper", Ref{}, "==", 0),
		goal("BenchmarkQuietForeignChanges", "wrapper-events/foreign-change", Ref{}, "==", 0),
		goal("BenchmarkSiteStream/nodes=20", "site-all/one-direct-all", Ref{}, "<=", 1.1),
		goal("BenchmarkFleet", "wrapper-B/a-Service-change", Ref{Metric: "direct-B/another-node's-status-report"}, "<=", 1.0),
		goal("BenchmarkMemory", "ratio:gridhosts-rss-1k", Ref{}, "<=", 1.2),
	}
	out := Check(goals, res, map[string]string{})
	want := []struct {
		status Status
		value  float64
		detail string
	}{
		{Met, 1.004, ""},
		{Missed, 1898.0 / 1889, "1,898 / 1,889"},
		{Met, 1898.0 / 1889, "1,898 / 1,889"},
		{Met, 11.0 / 13, "11 / 13"},
		{Met, 950, "median of 3, 900-1,200"},
		{Met, 1.18, "min=1.16 max=1.20 runs=3 load=2.1-3.0 world=controllers"},
		{Missed, 0.97, "pairs=4"},
		{Missing, 0, "BenchmarkReconnectStorm printed no relists-behind-wrapper"},
		{Missing, 0, "BenchmarkQuietForeignChanges printed no wrapper-events/foreign-change (fail: BenchmarkQuietForeignChanges)"},
		{Missing, 0, "BenchmarkSiteStream/nodes=20 printed no site-all/one-direct-all; it printed direct-quiet-B/s, ns/op, site-unit-B/op, site/one-direct"},
		{Missing, 0, "baseline BenchmarkFleet direct-B/another-node's-status-report is 0: no ratio"},
		{Missing, 0, "no ratio line gridhosts-rss-1k"},
	}
	for i, o := range out {
		w := want[i]
		if o.Status != w.status || (w.status != Missing && o.Value != w.value) || o.Detail != w.detail {
			t.Errorf("goal %d %s: %s %v %q, want %s %v %q", i, o.Goal.Name(), o.Status, o.Value, o.Detail, w.status, w.value, w.detail)
		}
	}

	// A run whose go test failed says so on its missing figures.
	out = Check([]Goal{goals[7]}, res, map[string]string{"r": "go test: exit status 1"})
	if !strings.HasSuffix(out[0].Detail, "(run r: go test: exit status 1)") {
		t.Errorf("detail %q", out[0].Detail)
	}

	failures := Failures(out)
	if len(failures) != 1 || !strings.HasPrefix(failures[0], "goal not measured: BenchmarkReconnectStorm relists-behind-wrapper, want == 0: ") ||
		!strings.HasSuffix(failures[0], "(docs/benchmarks/p.md)") {
		t.Errorf("failures: %q", failures)
	}
	failures = Failures(Check(goals[:3], res, nil))
	if len(failures) != 1 || failures[0] != "goal missed: BenchmarkFleet wrapper-B/a-Service-change / direct-B/a-Service-change = 1.005, want <= 1 (docs/benchmarks/p.md)" {
		t.Errorf("failures: %q", failures)
	}
}

func TestMeets(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		op   string
		t    float64
		want bool
	}{
		{1.2, "<=", 1.2, true}, {1.2001, "<=", 1.2, false}, {1, "<", 1, false}, {0.99, "<", 1, true},
		{1, ">=", 1, true}, {0.999, ">=", 1, false}, {1, ">", 1, false}, {0, "==", 0, true}, {0.1, "==", 0, false}, {1, "~", 1, false},
	} {
		if got := meets(tc.v, tc.op, tc.t); got != tc.want {
			t.Errorf("%v %s %v = %v", tc.v, tc.op, tc.t, got)
		}
	}
}

func TestRenderTable(t *testing.T) {
	out := []Outcome{
		{Goal: Goal{Benchmark: "BenchmarkFleet", Metric: "wrapper-B/x", Baseline: Ref{Metric: "direct-B/x"}, Op: "<=", Threshold: 1.01, Page: "docs/benchmarks/wrapper-fleet.md"},
			Status: Met, Value: 1.0047, Detail: "1,898 / 1,889"},
		{Goal: Goal{Benchmark: "BenchmarkReconnectStorm", Metric: "relists-behind-wrapper", Op: "==", Threshold: 0, Page: "wrapper/README.md"},
			Status: Missing, Detail: "a | b"},
	}
	want := "| result | benchmark | figure | measured | goal | from | page |\n" +
		"| --- | --- | --- | ---: | --- | --- | --- |\n" +
		"| met | `BenchmarkFleet` | `wrapper-B/x` / `direct-B/x` | 1.005 | <= 1.01 | 1,898 / 1,889 | [wrapper-fleet.md](wrapper-fleet.md) |\n" +
		"| **MISSING** | `BenchmarkReconnectStorm` | `relists-behind-wrapper` | - | == 0 | a \\| b | [README.md](../../wrapper/README.md) |\n"
	if got := RenderTable(out); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFormatNumber(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1.1: "1.1", 1.00471: "1.005", 950: "950", 1898: "1,898", 1234567: "1,234,567", -2500: "-2,500", 0.000123: "0.000123"} {
		if got := formatNumber(v); got != want {
			t.Errorf("formatNumber(%v) = %q, want %q", v, got, want)
		}
	}
}
