package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestConnectionBounds runs the command against a real apiserver, for the
// API port and the ops port alike: with --idle-connection-timeout 1s a
// connection that finished its request is closed by the wrapper; with
// --max-connections 2 a third connection is not served while two are open
// and is served once one closes; a Host that names neither a loopback
// address nor localhost gets 421 on both.
func TestConnectionBounds(t *testing.T) {
	cp := startWithNode0(t)
	for _, port := range []struct{ name, path string }{
		{"api", "/api/v1/namespaces/default/services/kubernetes"},
		{"ops", "/readyz"},
	} {
		t.Run(port.name, func(t *testing.T) { testConnectionBounds(t, cp.Kubeconfig, port.name == "ops", port.path) })
	}
}

func testConnectionBounds(t *testing.T, kubeconfig string, onOps bool, path string) {
	// No connection of its own left open: the readiness poll would take
	// one of --max-connections.
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	start := func(t *testing.T, flags ...string) string {
		addr, ops := freeAddr(t), freeAddr(t)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, append([]string{"application-grid-wrapper", "--kubeconfig", kubeconfig, "--node-name", "node0",
				"--bind-address", addr, "--metrics-bind-address", ops, "--insecure-plain-http"}, flags...))
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
		if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			resp, err := probe.Get("http://" + ops + "/readyz")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		}); err != nil {
			t.Fatal("wrapper not ready")
		}
		if onOps {
			return ops
		}
		return addr
	}
	// request sends one request on c and reads its answer within bound.
	var requestAs func(c net.Conn, r *bufio.Reader, bound time.Duration, host string) (int, error)
	request := func(c net.Conn, r *bufio.Reader, bound time.Duration) (int, error) {
		return requestAs(c, r, bound, "127.0.0.1")
	}
	requestAs = func(c net.Conn, r *bufio.Reader, bound time.Duration, host string) (int, error) {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
			return 0, err
		}
		_ = c.SetReadDeadline(time.Now().Add(bound))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, err
	}
	dial := func(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}

	t.Run("idle connection closed", func(t *testing.T) {
		addr := start(t, "--idle-connection-timeout", "1s")
		c, r := dial(t, addr)
		if code, err := request(c, r, 2*time.Minute); err != nil || code != http.StatusOK {
			t.Fatalf("request: %d %v", code, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection: read returned %v, want EOF (closed by the wrapper)", err)
		}
	})

	t.Run("connection cap", func(t *testing.T) {
		addr := start(t, "--max-connections", "2")
		c1, r1 := dial(t, addr)
		c2, r2 := dial(t, addr)
		for _, c := range []struct {
			c net.Conn
			r *bufio.Reader
		}{{c1, r1}, {c2, r2}} {
			if code, err := request(c.c, c.r, 2*time.Minute); err != nil || code != http.StatusOK {
				t.Fatalf("request within the cap: %d %v", code, err)
			}
		}
		c3, r3 := dial(t, addr)
		if code, err := request(c3, r3, 2*time.Second); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a third connection over --max-connections 2 was answered: %d %v", code, err)
		}
		c1.Close()
		// The request already sent is read once the connection is accepted.
		_ = c3.SetReadDeadline(time.Now().Add(2 * time.Minute))
		resp, err := http.ReadResponse(r3, nil)
		if err != nil {
			t.Fatalf("third connection after one closed: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("third connection after one closed: %s", resp.Status)
		}
	})

	t.Run("host rule", func(t *testing.T) {
		addr := start(t)
		c, r := dial(t, addr)
		if code, err := requestAs(c, r, 2*time.Minute, "rebound.example:51007"); err != nil || code != http.StatusMisdirectedRequest {
			t.Fatalf("a request under a foreign host name: %d %v, want 421", code, err)
		}
	})
}
