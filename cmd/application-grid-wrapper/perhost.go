package main

import (
	"net"
	"sync"
)

// defaultPeerMaxConnectionsPerHost bounds the peer port's connections from
// one address: a follower keeps one, plus a short one now and then; a LAN
// client holding connections open from one address then cannot take the
// slots of the site's real peers.
const defaultPeerMaxConnectionsPerHost = 8

// perHostListener closes at once a connection from an address that has
// max open already.
type perHostListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[string]int
}

func newPerHostListener(ln net.Listener, max int) *perHostListener {
	return &perHostListener{Listener: ln, max: max, open: map[string]int{}}
}

func (l *perHostListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		h := remoteHost(c)
		l.mu.Lock()
		over := l.open[h] >= l.max
		if !over {
			l.open[h]++
		}
		l.mu.Unlock()
		if over {
			_ = c.Close()
			continue
		}
		return &perHostConn{Conn: c, l: l, host: h}, nil
	}
}

func remoteHost(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	h, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return h
}

type perHostConn struct {
	net.Conn
	l    *perHostListener
	host string
	once sync.Once
}

func (c *perHostConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.l.open[c.host]--; c.l.open[c.host] <= 0 {
			delete(c.l.open, c.host)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
