package integration

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// Shipped peer port defaults (cmd/application-grid-wrapper): the test
// runs the leader with them and checks them from outside.
const (
	peerMaxConnections        = 64
	peerMaxConnectionsPerHost = 8
)

// TestPeerPortFlood attacks a real leader wrapper (the site-stream
// component's flags and ServiceAccount, its TokenReviews against the real
// apiserver) from one LAN address, 127.0.0.1: 64 connections held open,
// then ten seconds of requests with random tokens over as many
// connections. Of the held connections only the per-address cap stays
// open; the others are closed at once. Meanwhile a follower at another
// address, 127.0.0.2, presents its Pod's peer token, never seen by the
// leader before (so no cached review helps it): the leader serves it at its
// first or second try, because the flood's failed reviews are limited per
// source and do not queue ahead of it on the leader's client.
func TestPeerPortFlood(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	k := newKubectl(t, cp)
	applyNamespaces(k)
	applyPrerequisites(k)
	k.must("apply", "--server-side", "-k", defaultWithComponent(t, "site-stream"))

	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	ds, err := admin.AppsV1().DaemonSets("edge-system").Get(ctx, "application-grid-wrapper", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	flags, audience := siteStreamFlags(t, ds)
	const site = "shop"
	for _, n := range []string{"node0", "node1"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{flags["--site-label"]: site}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	peerToken := func(node string) string {
		t.Helper()
		tok, err := cp.PodToken(ctx, "edge-system", "servicegroup-wrapper", node, audience)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	kubeconfig, _, err := cp.PodServiceAccountKubeconfig(ctx, "edge-system", "servicegroup-wrapper", "node0")
	if err != nil {
		t.Fatal(err)
	}
	leaderToken := peerToken("node0")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(leaderToken), 0o600); err != nil {
		t.Fatal(err)
	}
	// 127.0.0.1: every loopback source address reaches it.
	peerAddr := controlplane.FreeAddress(t)
	leader := startComponent(t, "wrapper-node0", testbin.Path(t, "application-grid-wrapper"),
		"--kubeconfig="+kubeconfig, "--node-name=node0",
		"--bind-address="+controlplane.FreeAddress(t), "--insecure-plain-http",
		"--site-label="+flags["--site-label"], "--site-lease-namespace="+flags["--site-lease-namespace"],
		"--peer-bind-address="+peerAddr, "--peer-token-file="+tokenFile, "--v=2")

	// readyz asks the leader's peer port from source with token, as a
	// follower of the site does.
	readyz := func(c *http.Client, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+peerAddr+"/readyz", nil)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Application-Grid-Wrapper-Site", site)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, strings.TrimSpace(string(body)), nil
	}
	// The leader is ready for peers: asked with its own token, from a third
	// address (the follower's token stays unseen until the flood).
	self := peerClient("127.0.0.3", 10*time.Second)
	testwait.Eventually(ctx, t, 0, "the leader serves its site's peers", func(context.Context) error {
		code, body, err := readyz(self, leaderToken)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d %s", code, body)
		}
		if err != nil {
			return fmt.Errorf("%w; the leader's log:\n%s", err, leader.LogTail(20))
		}
		return nil
	})
	self.CloseIdleConnections()

	// From 127.0.0.1, connections held open (nothing sent): beyond the
	// per-address cap they are closed at once, well within the TLS
	// handshake's timeout (5 s) that would close the others.
	held := make([]net.Conn, peerMaxConnections)
	for i := range held {
		c, err := net.Dial("tcp", peerAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		held[i] = c
	}
	// Read all at once: a read past its deadline fails before looking
	// whether the server closed the connection.
	var closed atomic.Int64
	var reads sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for _, c := range held {
		reads.Go(func() {
			_ = c.SetReadDeadline(deadline)
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				closed.Add(1)
			}
		})
	}
	// Meanwhile a peer at another address is served at once, not after
	// the held connections' handshake timeout has freed slots.
	start := time.Now()
	code, body, err := readyz(self, leaderToken)
	if took := time.Since(start); err != nil || code != http.StatusOK || took > 2*time.Second {
		t.Errorf("a peer at 127.0.0.3, beside %d connections held from 127.0.0.1: %d %q %v after %v, want 200 at once",
			len(held), code, body, err, took.Round(time.Millisecond))
	}
	self.CloseIdleConnections()
	reads.Wait()
	closedAtOnce := int(closed.Load())
	if want := peerMaxConnections - peerMaxConnectionsPerHost; closedAtOnce != want {
		t.Errorf("%d of %d connections held from one address were closed at once, want the %d over its cap of %d",
			closedAtOnce, len(held), want, peerMaxConnectionsPerHost)
	}
	for _, c := range held {
		c.Close()
	}

	// The flood: from 127.0.0.1, as many workers as the port's connection
	// limit, each sending random tokens over keep-alive connections, for
	// ten seconds.
	type floodCounts struct{ unauthorized, limited, other, connErrors atomic.Int64 }
	var flood floodCounts
	floodCtx, stopFlood := context.WithTimeout(ctx, 10*time.Second)
	defer stopFlood()
	attacker := peerClient("127.0.0.1", 10*time.Second)
	attacker.Transport.(*http.Transport).MaxIdleConnsPerHost = peerMaxConnections
	var wg sync.WaitGroup
	for range peerMaxConnections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for floodCtx.Err() == nil {
				req, _ := http.NewRequestWithContext(floodCtx, http.MethodGet, "https://"+peerAddr+"/readyz", nil)
				req.Header.Set("Authorization", "Bearer "+randomToken())
				req.Header.Set("X-Application-Grid-Wrapper-Site", site)
				resp, err := attacker.Do(req)
				if err != nil {
					if floodCtx.Err() == nil {
						flood.connErrors.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusUnauthorized:
					flood.unauthorized.Add(1)
				case http.StatusTooManyRequests:
					flood.limited.Add(1)
				default:
					flood.other.Add(1)
				}
			}
		}()
	}

	// Two seconds into the flood, the follower at 127.0.0.2 with its
	// Pod's token, unseen by the leader: served at its first or second
	// try (a follower's client waits as long for an answer).
	time.Sleep(2 * time.Second)
	follower := peerClient("127.0.0.2", 10*time.Second)
	followerToken := peerToken("node1")
	var tries []string
	served := false
	for try := 1; try <= 2 && !served; try++ {
		start := time.Now()
		code, body, err := readyz(follower, followerToken)
		served = err == nil && code == http.StatusOK
		tries = append(tries, fmt.Sprintf("try %d after %v: %d %q %v", try, time.Since(start).Round(time.Millisecond), code, body, err))
	}
	wg.Wait()
	t.Logf("follower: %s", strings.Join(tries, "; "))
	t.Logf("flood from 127.0.0.1 in 10s: %d refused as unauthenticated (TokenReviews), %d refused before any review (429), %d other answers, %d connections failed or closed",
		flood.unauthorized.Load(), flood.limited.Load(), flood.other.Load(), flood.connErrors.Load())
	if !served {
		t.Errorf("a follower's valid peer token, during a flood of random tokens from another address, was not served at its first or second try: %s\nthe leader's log:\n%s",
			strings.Join(tries, "; "), leader.LogTail(40))
	}
	if flood.other.Load() != 0 {
		t.Errorf("the leader answered %d random tokens with neither 401 nor 429", flood.other.Load())
	}
	if flood.limited.Load() == 0 {
		t.Error("the leader reviewed every random token of the flood: no request refused before its review")
	}
	// TokenReviews one address may cause: ten at once, then one per 2 s
	// (16 in these 12 s), plus those under review when its failures ran
	// out (at most its connection cap, 8).
	if n := flood.unauthorized.Load(); n > 30 {
		t.Errorf("the leader asked the apiserver to review %d random tokens from one address in 10 s, want 30 at most", n)
	}
	// Still alive and leading after the flood.
	if exited, err := leader.Exited(); exited {
		t.Fatalf("the leader exited during the flood: %v\n%s", err, leader.LogTail(40))
	}
	code, body, err = readyz(peerClient("127.0.0.3", 10*time.Second), leaderToken)
	if err != nil || code != http.StatusOK {
		t.Errorf("after the flood the leader answers its own token with %d %q %v", code, body, err)
	}
}

// peerClient dials the peer port from source (a loopback address). It does
// not verify the leader's certificate: what is under test is the leader's
// authentication of its clients.
func peerClient(source string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: timeout}).DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, // see above
		MaxConnsPerHost: peerMaxConnections,
	}}
}

// randomToken is a bearer token no one issued, shaped like a JWT.
func randomToken() string {
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	return "eyJhbGciOiJSUzI1NiJ9." + hex.EncodeToString(b) + ".c2ln"
}
