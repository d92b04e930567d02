package cpuacct

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The environment that asks test harnesses for component records:
// ComponentsEnv names the file (hack/test.sh sets it), PackageEnv the
// package whose test binary runs (cpuacct exec sets it).
const (
	ComponentsEnv = "CPUACCT_COMPONENTS"
	PackageEnv    = "CPUACCT_PACKAGE"
)

// Component is one real component a test started and stopped (an etcd, a
// kube-apiserver, a kube-proxy): its own CPU time and how long it ran. The
// package records already count it; these say which components the CPU
// went to, and how many were started, so a package that starts a control
// plane per test shows.
type Component struct {
	Package string `json:"package"`
	// Name is the harness's name for it, Program the file it ran.
	Name    string  `json:"name"`
	Program string  `json:"program"`
	User    float64 `json:"userSeconds"`
	System  float64 `json:"systemSeconds"`
	Wall    float64 `json:"wallSeconds"`
}

// CPU is the component's user+sys.
func (c Component) CPU() time.Duration { return seconds(c.User + c.System) }

// RecordComponent appends a component's record when ComponentsEnv is set
// (it is a no-op otherwise). program is the file it ran, state the ended
// process's, wall how long it ran. A failed write is returned for the caller to log: it must not fail
// the test.
func RecordComponent(name, program string, state *os.ProcessState, wall time.Duration) error {
	path := os.Getenv(ComponentsEnv)
	if path == "" || state == nil {
		return nil
	}
	c := Component{
		Package: os.Getenv(PackageEnv), Name: name, Program: filepath.Base(program),
		User: state.UserTime().Seconds(), System: state.SystemTime().Seconds(), Wall: wall.Seconds(),
	}
	if c.Package == "" {
		c.Package = "?"
	}
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return appendLine(path, line)
}

// appendLine writes line and a newline to path in one write (O_APPEND:
// lines of concurrent writers never interleave).
func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadComponents reads a components file; a missing file holds none.
func ReadComponents(path string) ([]Component, error) {
	return readLines(path, func(c Component) string {
		if c.Program == "" {
			return "a component without a program"
		}
		return ""
	})
}

// ComponentUsage is the sum over the records of one key (a program, or a
// package and program).
type ComponentUsage struct {
	Key     string
	Started int
	CPU     time.Duration
	Wall    time.Duration
}

// SummarizeComponents sums the records by key, the costliest (CPU) first.
func SummarizeComponents(cs []Component, key func(Component) string) []ComponentUsage {
	by := map[string]*ComponentUsage{}
	for _, c := range cs {
		k := key(c)
		u := by[k]
		if u == nil {
			u = &ComponentUsage{Key: k}
			by[k] = u
		}
		u.Started++
		u.CPU += c.CPU()
		u.Wall += seconds(c.Wall)
	}
	out := make([]ComponentUsage, 0, len(by))
	for _, u := range by {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b ComponentUsage) int {
		return cmp.Or(cmp.Compare(b.CPU, a.CPU), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// WriteComponents prints the components' CPU-minutes by name and then by
// package and name, top lines of each.
func WriteComponents(w io.Writer, cs []Component, top int) error {
	bw := bufio.NewWriter(w)
	var total time.Duration
	for _, c := range cs {
		total += c.CPU()
	}
	fmt.Fprintf(bw, ">> the real components the tests started and stopped: %d, %s CPU-minutes (counted in their packages' above)\n",
		len(cs), minutes(total))
	table := func(title string, us []ComponentUsage) {
		fmt.Fprintf(bw, "%8s  %8s  %10s  %s\n", "started", "CPU min", "CPU s each", title)
		for i, u := range us {
			if i == top {
				break
			}
			fmt.Fprintf(bw, "%8d  %8.2f  %10.1f  %s\n", u.Started, u.CPU.Minutes(), u.CPU.Seconds()/float64(u.Started), u.Key)
		}
	}
	table("program", SummarizeComponents(cs, func(c Component) string { return c.Program }))
	table("package: program", SummarizeComponents(cs, func(c Component) string { return c.Package + ": " + c.Program }))
	return bw.Flush()
}
