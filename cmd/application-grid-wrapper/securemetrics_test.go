package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestSecureMetricsPortTakenWaited: another process holding the secure
// metrics port before the wrapper starts (issue 41: a `nobody` process
// made it exit into a crash loop) is waited for as the API port is: the
// wrapper keeps serving, /readyz names the port, and once the port is free
// the wrapper serves its metrics there (a scraper without a token gets 401
// from the wrapper itself).
func TestSecureMetricsPortTakenWaited(t *testing.T) {
	cp := startWithNode0(t)
	addr, ops, metrics := freeAddr(t), freeAddr(t), freeAddr(t)
	taken, err := net.Listen("tcp", metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"application-grid-wrapper", "--kubeconfig", cp.Kubeconfig, "--node-name", "node0",
			"--bind-address", addr, "--insecure-plain-http", "--metrics-bind-address", ops,
			"--secure-metrics-bind-address", metrics})
	}()
	get := func(url string, c *http.Client) (int, string) {
		resp, err := c.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			select {
			case err := <-done:
				t.Fatalf("the wrapper exited while %s: %v", what, err)
			default:
			}
			return cond(), nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll("/readyz names the taken metrics port", func() bool {
		code, body := get("http://"+ops+"/readyz", http.DefaultClient)
		return code == http.StatusServiceUnavailable && strings.Contains(body, metrics+" is in use by another process")
	})
	poll("kube-proxy's port serves meanwhile", func() bool {
		code, _ := get("http://"+addr+"/api/v1/services", http.DefaultClient)
		return code == http.StatusOK
	})
	_ = taken.Close()
	scraper := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	poll("the wrapper serves secure metrics once the port is free", func() bool {
		code, _ := get("https://"+metrics+"/metrics", scraper)
		return code == http.StatusUnauthorized
	})
	poll("/readyz ok", func() bool { code, _ := get("http://"+ops+"/readyz", http.DefaultClient); return code == http.StatusOK })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
