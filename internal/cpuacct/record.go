package cpuacct

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Usage is the CPU and wall time of one run: a command and every process
// it ran (User, System), and of those its own process alone (Self,
// user+sys; SelfUnknown when it could not be read).
type Usage struct {
	User        time.Duration
	System      time.Duration
	Wall        time.Duration
	Self        time.Duration
	SelfUnknown bool
}

// CPU is user+sys.
func (u Usage) CPU() time.Duration { return u.User + u.System }

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		User: u.User + v.User, System: u.System + v.System, Wall: u.Wall + v.Wall,
		Self: u.Self + v.Self, SelfUnknown: u.SelfUnknown || v.SelfUnknown,
	}
}

// Record is one test binary's run, as the records file holds it: one JSON
// object a line, appended by each run (go test runs several packages at
// once).
type Record struct {
	Package string  `json:"package"`
	User    float64 `json:"userSeconds"`
	System  float64 `json:"systemSeconds"`
	Wall    float64 `json:"wallSeconds"`
	// Self is the test binary's own user+sys, without what it ran (the real
	// components): where -race costs. Absent when unknown.
	Self *float64 `json:"selfSeconds,omitempty"`
	Exit int      `json:"exit"`
}

// NewRecord is the record of pkg's run.
func NewRecord(pkg string, u Usage, exit int) Record {
	r := Record{Package: pkg, User: u.User.Seconds(), System: u.System.Seconds(), Wall: u.Wall.Seconds(), Exit: exit}
	if !u.SelfUnknown {
		self := u.Self.Seconds()
		r.Self = &self
	}
	return r
}

// Usage is the record's times.
func (r Record) Usage() Usage {
	u := Usage{User: seconds(r.User), System: seconds(r.System), Wall: seconds(r.Wall), SelfUnknown: r.Self == nil}
	if r.Self != nil {
		u.Self = seconds(*r.Self)
	}
	return u
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Append adds r to the records file at path in one write (O_APPEND: records
// of concurrent runs never interleave).
func Append(path string, r Record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return appendLine(path, line)
}

// ReadRecords reads a records file; a missing file holds no records.
func ReadRecords(path string) ([]Record, error) {
	return readLines(path, func(r Record) string {
		if r.Package == "" {
			return "a record without a package"
		}
		return ""
	})
}

// readLines reads a file of one JSON object a line, blank lines skipped;
// missing says what a line lacks ("" when nothing). A missing file holds
// none.
func readLines[T any](path string, missing func(T) string) ([]T, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if what := missing(v); what != "" {
			return nil, fmt.Errorf("%s:%d: %s", path, n, what)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// PackageOf is the import path of the package in dir: the module path of
// the nearest go.mod above it joined with dir's path below that. go test
// runs a test binary (and its -exec program) in the package's directory.
func PackageOf(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for root := dir; ; {
		data, err := os.ReadFile(filepath.Join(root, "go.mod"))
		if err == nil {
			mod, err := modulePath(data)
			if err != nil {
				return "", fmt.Errorf("%s: %w", filepath.Join(root, "go.mod"), err)
			}
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				return "", err
			}
			if rel == "." {
				return mod, nil
			}
			return mod + "/" + filepath.ToSlash(rel), nil
		}
		if !os.IsNotExist(err) {
			return "", err
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("no go.mod in %s or above", dir)
		}
		root = parent
	}
}

// modulePath is the path of a go.mod's module directive.
func modulePath(gomod []byte) (string, error) {
	for line := range strings.Lines(string(gomod)) {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`), nil
		}
	}
	return "", fmt.Errorf("no module directive")
}
