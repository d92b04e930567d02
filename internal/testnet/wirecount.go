package testnet

import (
	"context"
	"net"
	"sync/atomic"
)

// WireCount counts what crosses the connections it wraps, as a link
// carries it: below TLS, so records, HTTP/2 frames and headers, HTTP/1.1
// chunking are in it, beside the decoded bodies a test counts elsewhere.
type WireCount struct {
	Rx, Tx atomic.Int64 // read from the peer, written to it
}

// Total is both directions: everything on the link.
func (w *WireCount) Total() int64 { return w.Rx.Load() + w.Tx.Load() }

// Conn returns c with its reads and writes counted in w.
func (w *WireCount) Conn(c net.Conn) net.Conn { return &countedConn{Conn: c, w: w} }

// DialContext dials with d and counts every connection it opens in w.
func (w *WireCount) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return w.Conn(c), nil
	}
}

type countedConn struct {
	net.Conn
	w *WireCount
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.w.Rx.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.w.Tx.Add(int64(n))
	return n, err
}
