// Command testrun runs packages' tests as go test -json does, from test
// binaries linked once per machine: go test links every package's test
// binary again on every run (some 100 CPU-seconds of race-instrumented
// linking per `make test`), where go test -c into a kept file links it only
// when something it is built from changed (go's build ID says so).
//
//	testrun -cache DIR [-name LANE] [-p N] [-exec CMD] -- FLAG... -- PKG...
//
// FLAGs are go test's: the build flags (-race, -trimpath, -ldflags, ...) go
// to go test -c, the test flags (-count, -timeout, -parallel, -run, ...) to
// the binaries as -test.* flags. The binaries are kept in DIR/LANE/, one
// directory per round of packages with distinct last path elements (go test
// -c -o DIR/ names each binary after it), so one go command links a round;
// a second run on the machine while one holds DIR/LANE uses a directory of
// its own.
// Each binary then runs in its package's directory through test2json, up to
// N at a time in the order given, behind CMD (as go test -exec); the events
// are written to stdout as each line comes, as go test -json writes them.
// A package without tests gets a skip event, one that does not build a fail
// event with go's output. testrun exits 1 when a package failed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

func main() {
	code, err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// testFlags are go test's flags the binary takes (as -test.NAME), with
// whether each takes a value.
var testFlags = map[string]bool{
	"bench": true, "benchmem": false, "benchtime": true, "count": true, "cpu": true,
	"failfast": false, "fullpath": false, "parallel": true, "run": true, "short": false,
	"shuffle": true, "skip": true, "timeout": true, "v": false,
}

// splitFlags parses go test's flags into those of go test -c and the
// binaries' own (as -test.NAME=VALUE).
func splitFlags(flags []string) (build, test []string, err error) {
	for i := 0; i < len(flags); i++ {
		f := flags[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(f, "-"), "=")
		takes, isTest := testFlags[name]
		switch {
		case !strings.HasPrefix(f, "-"):
			return nil, nil, fmt.Errorf("flag %q does not start with -", f)
		case !isTest:
			build = append(build, f)
		case takes && !hasValue:
			if i+1 == len(flags) {
				return nil, nil, fmt.Errorf("flag %s needs a value", f)
			}
			i++
			test = append(test, "-test."+name+"="+flags[i])
		case hasValue:
			test = append(test, "-test."+name+"="+value)
		default:
			test = append(test, "-test."+name)
		}
	}
	return build, test, nil
}

// rounds groups pkgs, in order, into lists with distinct last elements.
func rounds(pkgs []string) [][]string {
	var out [][]string
	var seen []map[string]bool
	for _, p := range pkgs {
		base := path.Base(p)
		i := 0
		for i < len(out) && seen[i][base] {
			i++
		}
		if i == len(out) {
			out = append(out, nil)
			seen = append(seen, map[string]bool{})
		}
		out[i] = append(out[i], p)
		seen[i][base] = true
	}
	return out
}

// event is one of test2json's records.
type event struct {
	Action  string
	Package string
	Output  string `json:",omitempty"`
}

// lockedWriter serializes writes to w: each Write lands whole, whichever
// goroutine copies it (test2json's event lines on stdout, the binaries'
// stderr).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// event writes e as one line of go test -json output.
func (l *lockedWriter) event(e event) {
	b, _ := json.Marshal(e)
	l.Write(append(b, '\n'))
}

func run(args []string, stdout, stderr io.Writer) (int, error) {
	stderr = &lockedWriter{w: stderr}
	fs := flag.NewFlagSet("testrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cache := fs.String("cache", "", "the directory the test binaries are kept in")
	name := fs.String("name", "default", "the lane: its binaries' subdirectory")
	p := fs.Int("p", 1, "how many test binaries run at a time")
	execCmd := fs.String("exec", "", "the command each test binary runs behind, as go test -exec")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	rest := fs.Args()
	sep := -1
	for i, a := range rest {
		if a == "--" {
			sep = i
			break
		}
	}
	if *cache == "" || sep < 0 || *p < 1 {
		return 0, errors.New("usage: testrun -cache DIR [-name LANE] [-p N] [-exec CMD] -- FLAG... -- PKG...")
	}
	build, test, err := splitFlags(rest[:sep])
	if err != nil {
		return 0, err
	}
	pkgs := rest[sep+1:]
	prefix, err := splitCommand(*execCmd)
	if err != nil {
		return 0, err
	}
	test2json, err := output("go", "tool", "-n", "test2json")
	if err != nil {
		return 0, err
	}
	dirs, withTests, err := packageDirs(pkgs)
	if err != nil {
		return 0, err
	}
	lane, unlock, err := laneDir(*cache, *name)
	if err != nil {
		return 0, err
	}
	defer unlock()

	out := &lockedWriter{w: stdout}
	failed := false
	bins := map[string]string{}
	var testable []string
	for _, p := range pkgs {
		if withTests[p] {
			testable = append(testable, p)
		}
	}
	for i, round := range rounds(testable) {
		dir := filepath.Join(lane, fmt.Sprintf("round-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, err
		}
		for _, p := range round {
			bins[p] = filepath.Join(dir, path.Base(p)+".test")
		}
		if link(round, build, dir+"/", stderr) == nil {
			continue
		}
		// Which of them did not build: each on its own, its output kept.
		for _, p := range round {
			var buf bytes.Buffer
			if link([]string{p}, build, dir+"/", &buf) != nil {
				failed = true
				out.event(event{Action: "output", Package: p, Output: buf.String()})
				out.event(event{Action: "fail", Package: p})
				delete(bins, p)
			}
		}
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	slots := make(chan struct{}, *p)
	for _, pkg := range pkgs {
		if !withTests[pkg] {
			// As go test -json ends it (go test -c would write nothing).
			out.event(event{Action: "output", Package: pkg, Output: "?   \t" + pkg + "\t[no test files]\n"})
			out.event(event{Action: "skip", Package: pkg})
			continue
		}
		bin, ok := bins[pkg]
		if !ok {
			continue // it did not build: failed above
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			cmd := exec.Command(test2json, "-t", "-p", pkg)
			cmd.Args = append(cmd.Args, prefix...)
			cmd.Args = append(cmd.Args, bin, "-test.paniconexit0", "-test.v=test2json")
			cmd.Args = append(cmd.Args, test...)
			cmd.Dir = dirs[pkg]
			cmd.Stderr = stderr
			if err := stream(cmd, out); err != nil {
				mu.Lock()
				failed = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed {
		return 1, nil
	}
	return 0, nil
}

// link runs go test -c for pkgs into dir (which ends in a slash), its
// output to w.
func link(pkgs, build []string, dir string, w io.Writer) error {
	args := append([]string{"test", "-c", "-o", dir}, build...)
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Stdout, cmd.Stderr = w, w
	return cmd.Run()
}

// stream runs cmd, copying its output lines to out.
func stream(cmd *exec.Cmd, out *lockedWriter) error {
	r, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			out.Write(line)
		}
		if err != nil {
			break
		}
	}
	return cmd.Wait()
}

// packageDirs maps each package to its source directory, and says which
// have test files.
func packageDirs(pkgs []string) (dirs map[string]string, withTests map[string]bool, err error) {
	args := append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{len .TestGoFiles}}{{len .XTestGoFiles}}"}, pkgs...)
	o, err := output("go", args...)
	if err != nil {
		return nil, nil, err
	}
	dirs, withTests = map[string]string{}, map[string]bool{}
	for l := range strings.Lines(o) {
		f := strings.Split(strings.TrimSpace(l), "\t")
		if len(f) == 3 {
			dirs[f[0]] = f[1]
			withTests[f[0]] = f[2] != "00"
		}
	}
	for _, p := range pkgs {
		if dirs[p] == "" {
			return nil, nil, fmt.Errorf("go list: no directory for %s (give import paths, not patterns)", p)
		}
	}
	return dirs, withTests, nil
}

// laneDir locks and returns DIR/LANE for this run's binaries, or, while
// another run holds it (two test runs on one machine), a directory of this
// run's own, removed at unlock: a binary is never replaced under a run
// that is running it.
func laneDir(cache, name string) (dir string, unlock func(), err error) {
	dir = filepath.Join(cache, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	f, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return dir, func() { f.Close() }, nil
	}
	f.Close()
	own, err := os.MkdirTemp(cache, name+"-")
	if err != nil {
		return "", nil, err
	}
	return own, func() { os.RemoveAll(own) }, nil
}

func output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	o, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(o)), nil
}

// splitCommand splits a go test -exec value into words; single or double
// quotes keep spaces inside a word, as go test's own splitting does.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("-exec %q: unterminated quote", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
