// Command testfailures prints, from go test -json's output, each failed
// test (the innermost failed subtest, not its parents) with the lines of
// its output that say why, and each package that failed outside any test
// (a build failure, a panic, the -timeout) with its last lines.
//
//	testfailures FILE...
//
// CI keeps only the end of a long run's output: hack/test.sh and .ci/run
// end with this, so the end names what failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testfailures FILE...")
		os.Exit(2)
	}
	var events []event
	for _, name := range os.Args[1:] {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testfailures:", err)
			os.Exit(1)
		}
		evs, err := readEvents(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testfailures: %s: %v\n", name, err)
			os.Exit(1)
		}
		events = append(events, evs...)
	}
	write(os.Stdout, failures(events))
}

// event is the part of a test2json event read here.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func readEvents(r io.Reader) ([]event, error) {
	var out []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // gotestsum and go test print other lines too
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// failure is one failed test, or a package that failed outside its tests
// (Test empty), with the lines that say why.
type failure struct {
	Package, Test string
	Why           []string
}

const (
	maxWhy     = 6
	maxLineLen = 400
)

// logLine is a test's t.Log/t.Error line: "    file_test.go:123: text"
// (klog's lines from client-go name other files).
var logLine = regexp.MustCompile(`^\s*[\w.-]+_test\.go:\d+: `)

// t.Error and t.Log lines look alike in the output; a failure's message
// mostly says "fail" (failsWord), else another of these (saysWhy), in its
// own words: not only inside quotes or parentheses, where a log line names
// what it shows (a table's "(failed of all attempts)", a finding quoted
// from another program). Good enough for a summary: the whole log has the
// rest.
var (
	failsWord = regexp.MustCompile(`(?i)fail`)
	saysWhy   = regexp.MustCompile(`(?i)error|want|got |expected|timed out|timeout|mismatch|missing|refused|not `)
	// aside: a double-quoted string (with its escapes) or a parenthesized
	// part without nested parentheses.
	aside = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|\([^()]*\)`)
)

// ownWords is a log line without its quoted and parenthesized parts.
func ownWords(l string) string { return aside.ReplaceAllString(l, " ") }

func failures(events []event) []failure {
	type key struct{ pkg, test string }
	output := map[key][]string{}
	var failed []key
	hasTests := map[string]bool{} // packages with a failed test
	for _, e := range events {
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			output[k] = append(output[k], strings.TrimRight(e.Output, "\n"))
		case "fail":
			failed = append(failed, k)
			if e.Test != "" {
				hasTests[e.Package] = true
			}
		}
	}
	var out []failure
	for _, k := range failed {
		if k.test == "" {
			if hasTests[k.pkg] {
				continue // its tests say why
			}
			out = append(out, failure{Package: k.pkg, Why: lastLines(output[k], maxWhy)})
			continue
		}
		// A parent fails with its subtests: only the innermost is named.
		if slices.ContainsFunc(failed, func(o key) bool {
			return o.pkg == k.pkg && strings.HasPrefix(o.test, k.test+"/")
		}) {
			continue
		}
		out = append(out, failure{Package: k.pkg, Test: k.test, Why: why(output[k])})
	}
	return out
}

// why picks at most maxWhy of a failed test's lines, kept in their order:
// its last log line (where a t.Fatal stopped it, or its last t.Error),
// then the lines saying "fail" and then the other telling lines, each the
// latest first: a long test logs tables and findings that say "failed"
// long before the error that ends it.
func why(lines []string) []string {
	last := -1
	var fails, others []int
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "panic:"):
			fails = append(fails, i)
		case logLine.MatchString(l):
			last = i
			if own := ownWords(l); failsWord.MatchString(own) {
				fails = append(fails, i)
			} else if saysWhy.MatchString(own) {
				others = append(others, i)
			}
		}
	}
	if last < 0 && len(fails) == 0 {
		return lastLines(lines, 3)
	}
	picked := map[int]bool{}
	if last >= 0 {
		picked[last] = true
	}
	for _, group := range [][]int{fails, others} {
		for j := len(group) - 1; j >= 0 && len(picked) < maxWhy; j-- {
			picked[group[j]] = true
		}
	}
	var out []string
	for i, l := range lines {
		if picked[i] {
			out = append(out, crop(strings.TrimSpace(l)))
		}
	}
	return out
}

func lastLines(lines []string, n int) []string {
	var out []string
	for _, l := range lines[max(0, len(lines)-n):] {
		out = append(out, crop(strings.TrimSpace(l)))
	}
	return out
}

func crop(s string) string {
	if len(s) > maxLineLen {
		return s[:maxLineLen] + " …"
	}
	return s
}

func write(w io.Writer, fs []failure) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, ">> what failed (%d; the whole output above says more)\n", len(fs))
	for _, f := range fs {
		if f.Test == "" {
			fmt.Fprintf(w, "--- FAIL: package %s (outside its tests)\n", f.Package)
		} else {
			fmt.Fprintf(w, "--- FAIL: %s (%s)\n", f.Test, f.Package)
		}
		for _, l := range f.Why {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}
