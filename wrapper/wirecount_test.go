package wrapper_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// wireCounter counts what crosses a client's TCP connections, below TLS:
// records, HTTP/2 frames and headers, HTTP/1.1 chunking, as a link carries
// them, beside the decoded bodies a byteCounter or cloudLink counts.
type wireCounter struct {
	rx, tx atomic.Int64 // received from the server, sent to it
}

func newWireCounter() *wireCounter { return &wireCounter{} }

// total is both directions: everything on the link.
func (w *wireCounter) total() int64 { return w.rx.Load() + w.tx.Load() }

// wrap returns cfg with one transport of its own, built as client-go
// builds one (its TLS, HTTP/2 and health-check defaults) but dialing
// through the counter: every client made from the copy shares its
// connections, as clients of one config share client-go's cached transport
// (a config with a Dial of its own would get one connection per client).
func (w *wireCounter) wrap(tb testing.TB, cfg *rest.Config) *rest.Config {
	tb.Helper()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := utilnet.SetTransportDefaults(&http.Transport{
		Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: 10 * time.Second, TLSClientConfig: tlsConfig,
		MaxIdleConnsPerHost: 25, IdleConnTimeout: 90 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countedConn{Conn: c, w: w}, nil
		},
	})
	cfg = rest.CopyConfig(cfg)
	cfg.Transport, cfg.TLSClientConfig = t, rest.TLSClientConfig{}
	tb.Cleanup(t.CloseIdleConnections)
	return cfg
}

type countedConn struct {
	net.Conn
	w *wireCounter
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.w.rx.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.w.tx.Add(int64(n))
	return n, err
}
