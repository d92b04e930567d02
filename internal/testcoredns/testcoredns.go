// Package testcoredns runs our CoreDNS binary (cmd/coredns) for tests:
// a free loopback port for it, the process with its log, stopped at the
// test's end.
package testcoredns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/lockedbuffer"
	"github.com/servicegroup/servicegroup/internal/testnet"
	"github.com/servicegroup/servicegroup/internal/testwait"
)

// FreePort returns a port free for both UDP and TCP on 127.0.0.1 (see
// testnet.FreePort).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := testnet.FreePort("127.0.0.1", true)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Process is one running CoreDNS.
type Process struct {
	Cmd      *exec.Cmd
	Corefile string               // its path: a test may rewrite it to trigger a reload
	Log      *lockedbuffer.Buffer // its output, readable while it runs
	Done     chan struct{}        // closed when the process has exited
}

// Start runs bin with corefile (and env added to this process's) until the
// test ends, and returns once readyURL answers 200. Its log is printed when
// the test failed or GRIDHOSTS_TEST_LOG is set.
func Start(t testing.TB, bin, corefile, readyURL string, env ...string) *Process {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Process{Corefile: path, Log: &lockedbuffer.Buffer{}, Done: make(chan struct{})}
	p.Cmd = exec.Command(bin, "-conf", path)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Log, p.Log
	p.Cmd.Env = append(os.Environ(), env...)
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.Cmd.Wait(); close(p.Done) }()
	t.Cleanup(func() {
		p.Cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.Done:
		case <-time.After(10 * time.Second):
			p.Cmd.Process.Kill()
			<-p.Done
		}
		if t.Failed() || os.Getenv("GRIDHOSTS_TEST_LOG") != "" {
			t.Logf("coredns log:\n%s", p.Log.String())
		}
	})
	testwait.Eventually(context.Background(), t, 60*time.Second, "coredns ready", func(ctx context.Context) error {
		select {
		case <-p.Done:
			return fmt.Errorf("coredns exited: %s", p.Log.String())
		default:
		}
		return testwait.HTTPOK(readyURL)(ctx)
	})
	return p
}
