package main

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/netutil"
	certutil "k8s.io/client-go/util/cert"
)

// The peer port holds at most its connection limit open, closes a
// connection that never finishes its TLS handshake, and so serves a real
// peer even while a LAN client keeps opening silent connections beyond the
// limit.
func TestPeerPortLimits(t *testing.T) {
	const limit = 2
	srv, ln := newTestPeerServer(t, 300*time.Millisecond)
	// Counted where the server takes and closes them: the server's
	// ConnState reports a close only after the limit has let the next
	// connection in, so it may count one more than is ever open.
	counted := &countingListener{Listener: netutil.LimitListener(ln, limit)}
	go func() { _ = srv.ServeTLS(counted, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	// Silent connections, twice the limit: no TLS handshake, nothing sent.
	var silent []net.Conn
	for range 2 * limit {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		silent = append(silent, c)
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, // the test's own certificate
	}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatalf("a peer behind %d silent connections: %v", len(silent), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a peer behind silent connections: %s", resp.Status)
	}
	client.CloseIdleConnections()
	// The server closed every silent connection (it reads as EOF), without
	// ever holding more than the limit open.
	for i, c := range silent {
		if err := c.SetReadDeadline(time.Now().Add(2 * time.Minute)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) || n > 0 {
			t.Errorf("silent connection %d was not closed by the server (read %d bytes, %v)", i, n, err)
		}
	}
	if m := counted.most.Load(); m != limit {
		t.Errorf("at most %d connections were open at once, want the limit %d reached and never passed", m, limit)
	}
}

// newTestPeerServer is the peer port's server answering "ok", under a
// certificate of the test's own, with its handshake bound, and a listener
// on 127.0.0.1 for it to serve (the test wraps it in the limits).
func newTestPeerServer(t *testing.T, handshake time.Duration) (*http.Server, net.Listener) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := newPeerServer(t.Context(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}, handshake)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return srv, ln
}

// countingListener counts the connections it handed out and that are not
// closed yet, and the most at once.
type countingListener struct {
	net.Listener
	open, most atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for m := l.most.Load(); n > m && !l.most.CompareAndSwap(m, n); m = l.most.Load() {
	}
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

// Close counts the connection closed before the limit lets the next one in.
func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// One address holding connections open (twice its cap, and beyond the
// overall limit) takes no slot of a peer at another address: connections
// over an address's cap are closed at once, and the peer is served.
func TestPeerPortPerHostCap(t *testing.T) {
	const perHost, limit = 2, 3
	srv, ln := newTestPeerServer(t, time.Minute)
	go func() { _ = srv.ServeTLS(netutil.LimitListener(newPerHostListener(ln, perHost), limit), "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	// From 127.0.0.1: silent connections, twice the per-address cap (and
	// more than the overall limit). Within the handshake timeout (a
	// minute here) only the cap's stay open.
	var silent []net.Conn
	for range 2 * perHost {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		silent = append(silent, c)
	}
	closed := 0
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	if closed != perHost {
		t.Errorf("%d of %d connections from one address closed at once, want the %d over its cap", closed, len(silent), perHost)
	}
	// A peer at 127.0.0.2 is served meanwhile, at once.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, // the test's own certificate
	}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatalf("a peer at another address, beside one address's connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a peer at another address: %s", resp.Status)
	}
}
