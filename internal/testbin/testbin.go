// Package testbin gives tests the path of one of this repository's commands:
// the prebuilt one in $SERVICEGROUP_BIN (make build's ./bin) when that is
// set, otherwise one built once per process with the Makefile's build
// settings (CGO off, -trimpath), so the compiled packages come from the same
// Go build cache entries as `make build` and the image builder. A command's
// own tests run their test binary as the command instead (StartSelf,
// SelfMain).
package testbin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/owneddir"
)

// EnvBin names a directory of prebuilt commands (make build's ./bin).
const EnvBin = "SERVICEGROUP_BIN"

// The commands, by binary name, and the main package each is built from.
var commands = map[string]string{
	"application-grid-controller": "./cmd/application-grid-controller",
	"application-grid-wrapper":    "./cmd/application-grid-wrapper",
	"coredns":                     "./cmd/coredns",
	"kubectl-grid":                "./cmd/kubectl-grid",
}

// LDFlags are the Makefile's linker flags with the version tests run under.
const LDFlags = "-s -w -X github.com/servicegroup/servicegroup/internal/version.Version=" + Version

// Version is what the binaries built here report.
const Version = "v0.0.0-test"

// buildTimeout bounds one go build; a cold build of CoreDNS on two busy
// cores takes several minutes.
const buildTimeout = 20 * time.Minute

var (
	// mu serialises builds: one go build at a time shares the compile work
	// of the common dependencies instead of doing it twice concurrently.
	mu     sync.Mutex
	dir    string
	built  = map[string]string{} // name -> path
	failed = map[string]error{}  // name -> the build's error, not retried
)

// Path returns the path of command name, or fails t.
func Path(t testing.TB, name string) string {
	t.Helper()
	paths, err := Paths(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return paths[name]
}

// Paths returns the paths of the named commands. Those not yet built in this
// process are built together in one go build.
func Paths(ctx context.Context, names ...string) (map[string]string, error) {
	for _, n := range names {
		if _, ok := commands[n]; !ok {
			return nil, fmt.Errorf("testbin: unknown command %q", n)
		}
	}
	if pre := os.Getenv(EnvBin); pre != "" {
		return prebuilt(pre, names)
	}
	mu.Lock()
	defer mu.Unlock()
	var todo []string
	for _, n := range names {
		if _, ok := built[n]; !ok && failed[n] == nil && !slices.Contains(todo, n) {
			todo = append(todo, n)
		}
	}
	if len(todo) > 0 {
		if err := build(ctx, todo); err != nil {
			for _, n := range todo {
				failed[n] = err
			}
		}
	}
	paths := map[string]string{}
	for _, n := range names {
		if err := failed[n]; err != nil {
			return nil, err
		}
		paths[n] = built[n]
	}
	return paths, nil
}

// prebuilt resolves names in dir; a missing binary is an error, not a build.
func prebuilt(dir string, names []string) (map[string]string, error) {
	if !filepath.IsAbs(dir) { // tests run in their package's directory
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(root, dir)
	}
	paths := map[string]string{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := os.Stat(p)
		if err == nil && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0) {
			err = errors.New("not an executable file")
		}
		if err != nil {
			return nil, fmt.Errorf("$%s=%s: %s: %w (run make build, or unset %s to build in the test)", EnvBin, dir, n, err, EnvBin)
		}
		paths[n] = p
	}
	return paths, nil
}

// build compiles names into this process's directory. Callers hold mu.
func build(ctx context.Context, names []string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = owneddir.Make("servicegroup-testbin-"); err != nil {
			return err
		}
	}
	args := []string{"build", "-trimpath", "-ldflags", LDFlags, "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, commands[n])
	}
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("CGO_ENABLED=0 go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	for _, n := range names {
		built[n] = filepath.Join(dir, n)
	}
	return nil
}

// Cleanup removes what this process built. Call it from TestMain after
// m.Run (or at a program's exit); later calls to Paths build again.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	dir = ""
	built = map[string]string{}
	failed = map[string]error{}
}

// Main is a TestMain for packages whose tests run what testbin builds: it
// runs the tests, then each of stops (what the tests shared), then Cleanup,
// and exits with the tests' code.
func Main(m *testing.M, stops ...func()) {
	code := m.Run()
	for _, stop := range stops {
		stop()
	}
	Cleanup()
	os.Exit(code)
}

// RepoRoot finds the repository root (the directory holding this module's
// go.mod) from the working directory upwards.
func RepoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/servicegroup/servicegroup\n") {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("repository root (go.mod of github.com/servicegroup/servicegroup) not found above the working directory")
		}
		d = parent
	}
}

// ReadRepoFile reads a file of this repository, by its path from the root.
func ReadRepoFile(rel ...string) ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(append([]string{root}, rel...)...))
}

// JSONLogMessages fails t for every line of log that is not a JSON object
// (what `--logging-format json` promises) and returns each line's "msg".
func JSONLogMessages(t testing.TB, log string) []string {
	t.Helper()
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var entry struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		msgs = append(msgs, entry.Msg)
	}
	return msgs
}
