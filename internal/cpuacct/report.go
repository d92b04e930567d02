package cpuacct

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// PackageUsage is one test package's part of a run.
type PackageUsage struct {
	Package string
	// Wall is how long its test binary ran: go test -json's Elapsed of the
	// package, or the records' wall time when the events do not have it.
	Wall time.Duration
	// CPU is the sum of the package's records (its Wall theirs); HasCPU is
	// false when it ran without the accounting (go test without -exec).
	CPU    Usage
	HasCPU bool
}

// Summary is a run's account: per package, and in total.
type Summary struct {
	Packages []PackageUsage // slowest (wall) first
	Tests    Usage          // the sum of every package's records
	// Whole is the whole run's usage (ProcessUsage of the script that ran
	// it: building and compiling included), when known.
	Whole *Usage
}

// Summarize joins the records with go test -json's events (a stream of
// JSON objects; nil for none) per package.
func Summarize(records []Record, events io.Reader, whole *Usage) (Summary, error) {
	byPkg := map[string]*PackageUsage{}
	get := func(pkg string) *PackageUsage {
		p := byPkg[pkg]
		if p == nil {
			p = &PackageUsage{Package: pkg}
			byPkg[pkg] = p
		}
		return p
	}
	s := Summary{Whole: whole}
	recordWall := map[string]time.Duration{}
	for _, r := range records {
		p := get(r.Package)
		u := r.Usage()
		p.CPU = p.CPU.Add(u)
		p.HasCPU = true
		recordWall[r.Package] += u.Wall
		s.Tests = s.Tests.Add(u)
	}
	elapsed, err := packageElapsed(events)
	if err != nil {
		return Summary{}, err
	}
	for pkg, e := range elapsed {
		get(pkg).Wall = e
	}
	for pkg, w := range recordWall {
		if _, ok := elapsed[pkg]; !ok {
			get(pkg).Wall = w
		}
	}
	for _, p := range byPkg {
		s.Packages = append(s.Packages, *p)
	}
	slices.SortFunc(s.Packages, func(a, b PackageUsage) int {
		return cmp.Or(cmp.Compare(b.Wall, a.Wall), cmp.Compare(b.CPU.CPU(), a.CPU.CPU()), cmp.Compare(a.Package, b.Package))
	})
	return s, nil
}

// packageElapsed reads go test -json's package results (pass, fail or
// skip events without a Test): how long each package's test binary ran,
// summed over the go tests that ran it (make test runs a few tests of a
// race package without -race too: hack/test.sh's NORACE_TESTS).
func packageElapsed(events io.Reader) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if events == nil {
		return out, nil
	}
	sc := bufio.NewScanner(events)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		var e struct {
			Action  string
			Package string
			Test    string
			Elapsed float64
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("go test -json event %d: %w", n, err)
		}
		if e.Test == "" && e.Package != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
			out[e.Package] += seconds(e.Elapsed)
		}
	}
	return out, sc.Err()
}

// Write prints the top slowest packages with their CPU time, then the
// totals, in CPU-minutes (user+sys).
func (s Summary) Write(w io.Writer, top int) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, ">> slowest packages: seconds the test binary ran (compiling not counted), the CPU-minutes")
	fmt.Fprintln(bw, "   (user+sys) of the binary and of every process it ran, and of those the binary's own")
	fmt.Fprintf(bw, "%8s  %8s  %8s  %s\n", "wall s", "CPU min", "binary", "package")
	for i, p := range s.Packages {
		if i == top {
			break
		}
		cpu, self := "-", "-"
		if p.HasCPU {
			cpu = fmt.Sprintf("%.2f", p.CPU.CPU().Minutes())
			if !p.CPU.SelfUnknown {
				self = fmt.Sprintf("%.2f", p.CPU.Self.Minutes())
			}
		}
		fmt.Fprintf(bw, "%8.1f  %8s  %8s  %s\n", p.Wall.Seconds(), cpu, self, p.Package)
	}
	counted := 0
	for _, p := range s.Packages {
		if p.HasCPU {
			counted++
		}
	}
	fmt.Fprintln(bw)
	fmt.Fprintln(bw, ">> CPU-minutes (user+sys; load-independent, unlike wall time)")
	self := minutes(s.Tests.Self)
	if s.Tests.SelfUnknown {
		self = "at least " + self
	}
	fmt.Fprintf(bw, "   test binaries of %d packages: %s (user %s, sys %s), %s of it in the binaries' own processes\n",
		counted, minutes(s.Tests.CPU()), minutes(s.Tests.User), minutes(s.Tests.System), self)
	if s.Whole != nil {
		fmt.Fprintf(bw, "   whole run: %s (user %s, sys %s) in %s minutes wall; compiling, building and the rest: %s\n",
			minutes(s.Whole.CPU()), minutes(s.Whole.User), minutes(s.Whole.System),
			minutes(s.Whole.Wall), minutes(s.Whole.CPU()-s.Tests.CPU()))
	}
	return bw.Flush()
}

// minutes formats d in minutes with one decimal.
func minutes(d time.Duration) string { return fmt.Sprintf("%.1f", d.Minutes()) }
