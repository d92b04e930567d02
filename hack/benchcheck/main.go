// Command benchcheck holds the benchmarks' quantitative goals
// (docs/benchmarks/goals.md, internal/benchcheck): it runs every
// benchmark with a goal at the size the goals file gives, each beside its
// baseline in one run, prints the table of goals met and missed, and exits
// 1 naming each goal missed or not measured. The runs of one group of the
// goals file run at the same time, a run of group "alone" with nothing
// beside it (benchcheck.Schedule, benchcheck.Execute); each run's output
// goes to its own file, and what bench-check says of the runs of a phase
// is printed whole, in the phase's order, once the phase has ended.
// `make bench-check` runs it; -from checks saved `go test -bench -v`
// output instead of running.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/servicegroup/servicegroup/internal/benchcheck"
	"github.com/servicegroup/servicegroup/internal/benchrecord"
)

func main() {
	goalsPath := flag.String("goals", "docs/benchmarks/goals.md", "the goals file")
	only := flag.String("runs", "", "comma-separated runs of the goals file to run, in this order (default: every run, in the file's order); runs of one group still run together")
	from := flag.String("from", "", "comma-separated `go test -bench -v` outputs to check instead of running the benchmarks")
	logDir := flag.String("logs", "", "directory for each run's output (default: a new one under the temporary directory)")
	record := flag.String("record", "", "write the result, with date, commit and load, as markdown to this file")
	budget := flag.Duration("budget", 15*time.Minute, "the time bench-check should take; a longer run is reported")
	flag.Parse()
	if err := run(*goalsPath, *only, *from, *logDir, *record, *budget); err != nil {
		fmt.Fprintln(os.Stderr, "bench-check:", err)
		os.Exit(2)
	}
}

// runResult is one run's output and how it ended.
type runResult struct {
	run     benchcheck.Run
	took    time.Duration
	cpu     time.Duration // user+sys of the test binary and what it waited for
	failure string        // "" when go test succeeded
	log     string
	report  string // what bench-check says of it once its phase has ended
}

// phaseResult is one phase: its runs' results, in order, and how long it took.
type phaseResult struct {
	phase              benchcheck.Phase
	took               time.Duration
	loadStart, loadEnd string
	runs               []runResult
}

func run(goalsPath, only, from, logDir, record string, budget time.Duration) error {
	f, err := os.Open(goalsPath)
	if err != nil {
		return err
	}
	table, err := benchcheck.ParseTable(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", goalsPath, err)
	}
	runs := table.Runs
	if only != "" {
		runs = nil
		for _, name := range strings.Split(only, ",") {
			r, ok := table.RunByName(strings.TrimSpace(name))
			if !ok {
				return fmt.Errorf("-runs: %s has no run %q", goalsPath, name)
			}
			if slices.ContainsFunc(runs, func(o benchcheck.Run) bool { return o.Name == r.Name }) {
				return fmt.Errorf("-runs: run %q named twice", r.Name)
			}
			runs = append(runs, r)
		}
	}
	goals := table.Goals
	if only != "" {
		goals = slices.DeleteFunc(slices.Clone(goals), func(g benchcheck.Goal) bool {
			return !slices.ContainsFunc(runs, func(r benchcheck.Run) bool { return r.Name == g.Run })
		})
	}

	started, loadStart := time.Now().UTC(), benchrecord.LoadAverage()
	res := benchcheck.NewResults()
	runFailed := map[string]string{}
	var done []phaseResult
	var bins []testBinary
	if from != "" {
		for _, path := range strings.Split(from, ",") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := res.Parse(bytes.NewReader(data)); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	} else {
		if logDir == "" {
			if logDir, err = os.MkdirTemp("", "bench-check-"); err != nil {
				return err
			}
		} else if err := os.MkdirAll(logDir, 0o755); err != nil {
			return err
		}
		phases := benchcheck.Schedule(runs)
		fmt.Fprintf(os.Stderr, "bench-check: %d runs in %d phases, output in %s\n", len(runs), len(phases), logDir)
		var mu sync.Mutex // bins is appended to by the builds, read after
		var phaseStart time.Time
		var phaseLoad string
		benchcheck.Execute(phases,
			func(pkg string) testBinary {
				b := buildTestBinary(pkg, logDir)
				mu.Lock()
				bins = append(bins, b)
				mu.Unlock()
				return b
			},
			func(r benchcheck.Run, bin testBinary) runResult { return execute(r, bin, logDir) },
			benchcheck.Hooks[runResult]{
				PhaseStart: func(i int, p benchcheck.Phase) {
					phaseStart, phaseLoad = time.Now(), benchrecord.LoadAverage()
					fmt.Fprintf(os.Stderr, "bench-check: phase %d of %d, %s (load %s):\n", i+1, len(phases), phaseName(p), phaseLoad)
					for _, r := range p.Runs {
						fmt.Fprintf(os.Stderr, "bench-check:   run %s: %s\n", r.Name, commandLine(r))
					}
				},
				PhaseDone: func(i int, p benchcheck.Phase, results []runResult) {
					pr := phaseResult{phase: p, took: time.Since(phaseStart), loadStart: phaseLoad, loadEnd: benchrecord.LoadAverage(), runs: results}
					for _, rr := range results {
						fmt.Fprint(os.Stderr, rr.report)
					}
					fmt.Fprintf(os.Stderr, "bench-check: phase %d of %d done in %s (load %s)\n", i+1, len(phases), pr.took.Round(time.Second), pr.loadEnd)
					done = append(done, pr)
				},
			})
		for _, pr := range done {
			for _, rr := range pr.runs {
				if rr.failure != "" {
					runFailed[rr.run.Name] = rr.failure
				}
				data, err := os.ReadFile(rr.log)
				if err != nil {
					return err
				}
				if err := res.Parse(bytes.NewReader(data)); err != nil {
					return fmt.Errorf("%s: %w", rr.log, err)
				}
			}
		}
	}
	took, cpu := time.Since(started), childrenCPU()
	outcomes := benchcheck.Check(goals, res, runFailed)
	failures := benchcheck.Failures(outcomes)

	var page strings.Builder
	fmt.Fprintf(&page, "- Date: %s, %s\n", started.Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	if from == "" {
		fmt.Fprintf(&page, "- Wall time %s, CPU time (user+sys of every process the runs started and waited for) %s: %.2f of the %d CPUs on average\n",
			took.Round(time.Second), cpu.Round(time.Second), cpu.Seconds()/took.Seconds(), runtime.NumCPU())
	}
	fmt.Fprintf(&page, "- Commit: `%s`\n", benchrecord.Commit("."))
	fmt.Fprintf(&page, "- Go: %s, %d CPUs\n", runtime.Version(), runtime.NumCPU())
	fmt.Fprintf(&page, "- Load average (1, 5, 15 min): %s at start, %s at end\n", loadStart, benchrecord.LoadAverage())
	if from != "" {
		fmt.Fprintf(&page, "- Checked from saved output: %s\n", from)
	}
	if len(bins) > 0 {
		var built []string
		for _, b := range bins {
			built = append(built, fmt.Sprintf("`%s` %s", b.pkg, b.took.Round(time.Second)))
		}
		fmt.Fprintf(&page, "- Test binaries (`go test -c`, one after the other from the start, beside the runs together, never beside a run alone): %s\n", strings.Join(built, ", "))
	}
	for i, pr := range done {
		fmt.Fprintf(&page, "- Phase %d, %s: %s, load %s at start, %s at end\n", i+1, phaseName(pr.phase), pr.took.Round(time.Second), pr.loadStart, pr.loadEnd)
		for _, rr := range pr.runs {
			state := "ok"
			if rr.failure != "" {
				state = rr.failure
			}
			fmt.Fprintf(&page, "  - Run `%s`: %s (CPU %s), %s: `%s`\n", rr.run.Name, rr.took.Round(time.Second), rr.cpu.Round(time.Second), state, commandLine(rr.run))
		}
	}
	if from == "" && took > budget {
		fmt.Fprintf(&page, "- **Over budget**: %s, more than %s\n", took.Round(time.Second), budget)
	}
	page.WriteString("\n")
	page.WriteString(benchcheck.RenderTable(outcomes))
	if len(failures) > 0 {
		page.WriteString("\n")
		for _, f := range failures {
			fmt.Fprintf(&page, "- %s\n", f)
		}
	}
	fmt.Print(page.String())
	if record != "" {
		if err := os.WriteFile(record, []byte(page.String()), 0o644); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintln(os.Stderr, "bench-check:", f)
		}
		os.Exit(1)
	}
	return nil
}

// goCommand is the go command to run (GO, as the Makefile names it).
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// testBinary is a package's test binary, built once for all its runs, and
// the package's directory, where go test runs it.
type testBinary struct {
	pkg, path, dir string
	took           time.Duration
	err            error // the build's failure
}

// buildTestBinary builds pkg's test binary (go test -c) for all the runs of
// pkg: seven runs of ./wrapper/ then pay for one build check and link
// instead of seven (6-11 s each on the loaded 2-core machine).
func buildTestBinary(pkg, logDir string) (b testBinary) {
	start := time.Now()
	b.pkg = pkg
	defer func() { b.took = time.Since(start) }()
	out, err := exec.Command(goCommand(), "list", "-f", "{{.Dir}}", pkg).Output()
	if err != nil {
		b.err = fmt.Errorf("go list %s: %w", pkg, err)
		return b
	}
	b.dir = strings.TrimSpace(string(out))
	b.path = filepath.Join(logDir, strings.NewReplacer("/", "_", ".", "_").Replace(strings.Trim(pkg, "./"))+".test")
	if out, err := exec.Command(goCommand(), "test", "-c", "-o", b.path, pkg).CombinedOutput(); err != nil {
		b.err = fmt.Errorf("go test -c %s: %v\n%s", pkg, err, out)
	}
	return b
}

// phaseName says how a phase's runs run.
func phaseName(p benchcheck.Phase) string {
	if p.Alone() {
		return fmt.Sprintf("`%s` alone", p.Runs[0].Name)
	}
	return fmt.Sprintf("`%s` together (group `%s`)", strings.Join(p.Names(), "`, `"), p.Group)
}

// binaryArgs are testArgs as the test binary takes them.
func binaryArgs(r benchcheck.Run) []string {
	return []string{"-test.paniconexit0", "-test.run", "^$", "-test.bench", r.Bench, "-test.benchtime", r.Benchtime,
		"-test.count", strconv.Itoa(r.Count), "-test.timeout", r.Timeout.String(), "-test.v=true"}
}

func testArgs(r benchcheck.Run) []string {
	return []string{"test", "-run", "^$", "-bench", r.Bench, "-benchtime", r.Benchtime,
		"-count", strconv.Itoa(r.Count), "-timeout", r.Timeout.String(), "-v", r.Package}
}

// commandLine is the run as a shell command, to re-run it alone (what the
// run does with the package's test binary).
func commandLine(r benchcheck.Run) string {
	parts := slices.Clone(r.Env)
	parts = append(parts, goCommand())
	for _, a := range testArgs(r) {
		if strings.ContainsAny(a, "^$|()*") {
			a = "'" + a + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// execute runs r with its package's test binary, as go test would, its
// output into a file of logDir, and says how it went.
func execute(r benchcheck.Run, bin testBinary, logDir string) runResult {
	rr := runResult{run: r, log: filepath.Join(logDir, r.Name+".log")}
	out, err := os.Create(rr.log)
	if err != nil {
		rr.failure = err.Error()
		rr.report = fmt.Sprintf("bench-check: run %s: %v\n", r.Name, err)
		return rr
	}
	defer out.Close()
	if bin.err != nil {
		fmt.Fprintln(out, bin.err)
		rr.failure = fmt.Sprintf("%v, see %s", bin.err, rr.log)
		rr.report = fmt.Sprintf("bench-check: run %s: %v\n", r.Name, bin.err)
		return rr
	}
	// -test.timeout ends the benchmark with a stack dump; this is a
	// backstop if the binary hangs anyway.
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.path, binaryArgs(r)...)
	cmd.Dir = bin.dir
	cmd.Env = append(os.Environ(), r.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err = cmd.Run()
	rr.took = time.Since(start)
	if cmd.ProcessState != nil {
		rr.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		rr.failure = fmt.Sprintf("test binary: %v, see %s", err, rr.log)
		tail, _ := tailOf(rr.log, 20)
		rr.report = fmt.Sprintf("bench-check: run %s failed after %s (%v); the end of %s:\n%s\n", r.Name, rr.took.Round(time.Second), err, rr.log, tail)
	} else {
		rr.report = fmt.Sprintf("bench-check: run %s done in %s (CPU %s, load at its end %s)\n", r.Name, rr.took.Round(time.Second), rr.cpu.Round(time.Second), benchrecord.LoadAverage())
	}
	return rr
}

// childrenCPU is the user+sys CPU time of every child process this one
// waited for, and of theirs: go test, the test binaries, the apiservers,
// CoreDNS and the rest the benchmarks started and stopped.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func tailOf(path string, lines int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n"), nil
}
