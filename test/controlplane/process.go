package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/servicegroup/servicegroup/internal/cpuacct"
	"github.com/servicegroup/servicegroup/internal/testnet"
)

// Process is a program a harness started: one of the control-plane
// binaries here, or a component a test runs (kube-proxy, wrapper, CoreDNS).
// It runs in its own process group, so stopping it never touches anything
// else, and dies with the harness (Pdeathsig) even if the test binary is killed.
//
// Pdeathsig fires when the OS *thread* that started the process exits, not
// the Go process: code in the same process that locks a thread and lets it
// exit (e.g. after setns) would kill these children. Keep such threads alive
// or restore and unlock them.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex
	err     error
}

// StartProcess starts cmd with its output appended to dir/NAME.log.
func StartProcess(name string, cmd *exec.Cmd, dir string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	started := time.Now()
	go func() {
		err := cmd.Wait()
		// Under hack/test.sh, say what this component cost (a no-op
		// otherwise): which components a package's CPU went to.
		if rerr := cpuacct.RecordComponent(name, cmd.Path, cmd.ProcessState, time.Since(started)); rerr != nil {
			fmt.Fprintf(os.Stderr, "controlplane: recording %s's CPU time: %v\n", name, rerr)
		}
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func startProcess(name, bin string, args []string, logDir string, extraEnv []string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	return StartProcess(name, cmd, logDir)
}

// PID is the process's id (also its process group's id).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Status is "running", or how the process ended: a component that died
// on its own is the first thing to know when a cluster stops making
// progress.
func (p *Process) Status() string {
	done, err := p.Exited()
	switch {
	case !done:
		return "running"
	case err != nil:
		return "exited: " + err.Error()
	}
	return "exited: status 0"
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if p == nil {
		return
	}
	if done, _ := p.Exited(); done {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// Log returns the process's whole output so far.
func (p *Process) Log() string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// LogTail returns the last n lines of the process's output.
func (p *Process) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreePort is an unused TCP port on host that no outgoing connection can
// take before the server binds it (see testnet.FreePort).
func FreePort(host string) (int, error) { return testnet.FreePort(host, false) }

// waitFor polls check until it returns nil, the process exits, or ctx ends.
// A timeout names each different error the checks met, with how often:
// "context deadline exceeded" alone cannot tell a server that never
// answered from one that answered not ready until the last check.
func waitFor(ctx context.Context, p *Process, what string, check func() error) error {
	var errs checkErrors
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		last := check()
		if last == nil {
			return nil
		}
		errs.add(last)
		if p != nil {
			if done, err := p.Exited(); done {
				return fmt.Errorf("%s exited before %s: %v\n%s", p.Name, what, err, p.LogTail(30))
			}
		}
		select {
		case <-ctx.Done():
			tail := ""
			if p != nil {
				tail = "\n" + p.LogTail(30)
			}
			return fmt.Errorf("timed out waiting for %s: %w (checks met: %s)%s", what, ctx.Err(), errs.String(), tail)
		case <-tick.C:
		}
	}
}

// checkErrors counts a wait's check errors by their text, in the order first met.
type checkErrors struct {
	texts  []string
	counts map[string]int
}

func (e *checkErrors) add(err error) {
	text := err.Error()
	if len(text) > 300 {
		text = text[:300] + "..."
	}
	if e.counts == nil {
		e.counts = map[string]int{}
	}
	if e.counts[text] == 0 {
		e.texts = append(e.texts, text)
	}
	e.counts[text]++
}

func (e *checkErrors) String() string {
	var parts []string
	for _, text := range e.texts {
		parts = append(parts, fmt.Sprintf("%dx %q", e.counts[text], text))
	}
	return strings.Join(parts, ", ")
}

func itoa(i int) string { return strconv.Itoa(i) }

var errNotReady = errors.New("not ready")
