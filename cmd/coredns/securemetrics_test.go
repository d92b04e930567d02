package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/servicegroup/servicegroup/internal/lockedbuffer"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testnet"
	"github.com/servicegroup/servicegroup/internal/testwait"
)

// TestSecureMetricsPortTakenWaited: another process holds the secure-metrics
// port when CoreDNS starts (on a node, any local user may bind it first).
// CoreDNS keeps running and answering DNS, says what it waits for, and
// serves TLS on the port once it is free.
func TestSecureMetricsPortTakenWaited(t *testing.T) {
	if testing.Short() {
		t.Skip("builds CoreDNS")
	}
	bin := testbin.Path(t, "coredns")
	dir := t.TempDir()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := held.Addr().String()
	// The token reviews would go here; nothing listens (no scrape is made).
	kubeconfig := refusingKubeconfig(t, dir)
	// CoreDNS binds the DNS port for UDP and TCP: a port only UDP found free
	// may be an outgoing TCP connection's (testnet.FreePort).
	port, err := testnet.FreePort("127.0.0.1", true)
	if err != nil {
		t.Fatal(err)
	}
	dnsPort := strconv.Itoa(port)
	dnsAddr := net.JoinHostPort("127.0.0.1", dnsPort)
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(".:"+dnsPort+" {\n    bind 127.0.0.1\n    whoami\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out lockedbuffer.Buffer
	cmd := exec.CommandContext(t.Context(), bin, "-conf", corefile,
		"-secure-metrics-bind-address", metrics, "-secure-metrics-kubeconfig", kubeconfig)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()

	testwait.Eventually(t.Context(), t, 0, "CoreDNS answers DNS and says it waits for the taken port", func(context.Context) error {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("coredns exited while the port was taken: %v\n%s", err, out.String())
		default:
		}
		if !strings.Contains(out.String(), "secure metrics: waiting for "+metrics) {
			return fmt.Errorf("output so far:\n%s", out.String())
		}
		m := new(dns.Msg)
		m.SetQuestion("example.org.", dns.TypeA)
		if _, _, err := new(dns.Client).Exchange(m, dnsAddr); err != nil {
			return err
		}
		return nil
	})
	// Still running a while later, then serving once the port is free.
	time.Sleep(3 * time.Second)
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("coredns exited while the port was taken: %v\n%s", err, out.String())
	default:
	}
	held.Close()
	testwait.Eventually(t.Context(), t, 0, "the secure-metrics port served by CoreDNS once free", func(context.Context) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", metrics, &tls.Config{InsecureSkipVerify: true}) // only that CoreDNS serves TLS there
		if err != nil {
			return err
		}
		return c.Close()
	})
}
