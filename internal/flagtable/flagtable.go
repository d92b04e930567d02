// Package flagtable checks a README's flag table against the flags a
// command registers (names and defaults), read from the command's own -h,
// so the table cannot drift from the binary.
package flagtable

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Flag is one flag as Go's flag package prints it for -h. Default is ""
// when the flag's default is its zero value (the usage shows none then).
type Flag struct {
	Name, Type, Default string
}

var (
	flagLine    = regexp.MustCompile(`^  -(\S+)(?: (\S+))?$`)
	defaultText = regexp.MustCompile(`\(default (.*)\)$`)
)

// Registered runs binary -h with env added to a copy of this process's
// environment and parses the flags from what it prints.
func Registered(ctx context.Context, binary string, env ...string) (map[string]Flag, error) {
	cmd := exec.CommandContext(ctx, binary, "-h")
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // -h exits non-zero with some flag.ErrorHandling modes
	flags := map[string]Flag{}
	var last *Flag
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if m := flagLine.FindStringSubmatch(line); m != nil {
			flags[m[1]] = Flag{Name: m[1], Type: m[2]}
			f := flags[m[1]]
			last = &f
			continue
		}
		if last == nil || !strings.HasPrefix(line, "    \t") {
			continue
		}
		if m := defaultText.FindStringSubmatch(line); m != nil {
			d := m[1]
			if last.Type == "string" {
				// flag quotes a string's default: unquoted, the
				// parenthesis is the usage's own text.
				u, err := strconv.Unquote(d)
				if err != nil {
					continue
				}
				d = u
			}
			last.Default = d
			flags[last.Name] = *last
		}
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("%s -h printed no flags:\n%s", binary, out.String())
	}
	return flags, nil
}

// Row is one row of a flag table: the flags of its first cell, its default
// cell and the whole row's text.
type Row struct {
	Flags   []string
	Default string
	Text    string
}

var cellFlag = regexp.MustCompile("`--?([a-z0-9][a-z0-9-]*)`")

// Table reads the rows of every Markdown table in the file at path whose
// header starts with "| flag | default |".
func Table(path string) ([]Row, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []Row
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "| flag | default |"):
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(line, " | ")
			if len(cells) < 3 {
				return nil, fmt.Errorf("%s: a flag table row without three cells: %s", path, line)
			}
			r := Row{Default: strings.TrimSpace(cells[1]), Text: line}
			for _, m := range cellFlag.FindAllStringSubmatch(cells[0], -1) {
				r.Flags = append(r.Flags, m[1])
			}
			rows = append(rows, r)
		default:
			in = false
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no table headed \"| flag | default |\"", path)
	}
	return rows, nil
}

// LoggingAlpha are component-base's alpha logging flags (internal/logging
// registers them with the rest): documented by Kubernetes, not by us.
var LoggingAlpha = []string{"log-json-info-buffer-size", "log-json-split-stream", "log-text-info-buffer-size", "log-text-split-stream"}

// zeroWords are default cells that mean the flag's zero value.
var zeroWords = []string{"none", "false", "0", `""`, "in-cluster"}

// documentedDefault is the value a default cell states: its text before
// any parenthesis, without backticks; "" for the zero value, and for
// another flag (`--x`: that flag's value) or an environment variable
// (`$X`: Check runs the command without it), which the command derives
// from a zero default.
func documentedDefault(cell string) string {
	d, _, _ := strings.Cut(cell, " (")
	d = strings.Trim(strings.TrimSpace(d), "`")
	if slices.Contains(zeroWords, d) || strings.HasPrefix(d, "--") || strings.HasPrefix(d, "$") {
		return ""
	}
	return d
}

func sameDefault(f Flag, documented string) bool {
	if f.Type == "duration" && f.Default != "" && documented != "" {
		a, errA := time.ParseDuration(f.Default)
		b, errB := time.ParseDuration(documented)
		return errA == nil && errB == nil && a == b
	}
	return f.Default == documented
}

// Diff lists every difference between the registered flags and the rows:
// a row naming a flag the command lacks, a default that differs, and a
// registered flag the table does not name (in a row's first cell or, for
// companions of a flag, in a row's text as `--name`), unless it is in
// undocumented.
func Diff(flags map[string]Flag, rows []Row, undocumented ...string) []string {
	var diffs []string
	named := map[string]bool{}
	for _, r := range rows {
		for _, m := range cellFlag.FindAllStringSubmatch(r.Text, -1) {
			named[m[1]] = true
		}
		for _, name := range r.Flags {
			f, ok := flags[name]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("the table lists --%s, which the command does not register", name))
				continue
			}
			if !sameDefault(f, documentedDefault(r.Default)) {
				diffs = append(diffs, fmt.Sprintf("--%s: the table says default %q, the command %q", name, r.Default, f.Default))
			}
		}
	}
	for _, name := range sortedKeys(flags) {
		if !named[name] && !slices.Contains(undocumented, name) {
			diffs = append(diffs, fmt.Sprintf("--%s (default %q) is missing from the table", name, flags[name].Default))
		}
	}
	return diffs
}

func sortedKeys(m map[string]Flag) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Check fails t for every difference between the table in readme and the
// flags binary (a path) registers, run with env; component-base's alpha
// logging flags need no row.
func Check(t testing.TB, binary, readme string, env ...string) {
	t.Helper()
	flags, err := Registered(t.Context(), binary, env...)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Table(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Diff(flags, rows, LoggingAlpha...) {
		t.Errorf("%s: %s", readme, d)
	}
}
