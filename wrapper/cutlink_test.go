package wrapper_test

import (
	"context"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
)

// cutLink is a link to the apiserver a test can cut: while cut, opening
// anything over it fails as when the route drops (no route to host), and
// cutting closes everything open over it, so open streams end.
type cutLink struct {
	mu   sync.Mutex
	down bool
	open map[io.Closer]struct{}
}

func newCutLink() *cutLink { return &cutLink{open: map[io.Closer]struct{}{}} }

func errNoRoute(network string) error {
	return &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}
}

// opened tracks c until closed; when the link is cut it closes c and
// returns false.
func (l *cutLink) opened(c io.Closer) bool {
	l.mu.Lock()
	down := l.down
	if !down {
		l.open[c] = struct{}{}
	}
	l.mu.Unlock()
	if down {
		_ = c.Close()
	}
	return !down
}

func (l *cutLink) closed(c io.Closer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.open, c)
}

func (l *cutLink) isCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down
}

// setCut cuts the link (closing what is open) or restores it. Closing
// happens outside the lock: a Close may call closed.
func (l *cutLink) setCut(cut bool) {
	l.mu.Lock()
	l.down = cut
	var open []io.Closer
	if cut {
		open = slices.Collect(maps.Keys(l.open))
		clear(l.open)
	}
	l.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// each calls f for every open thing.
func (l *cutLink) each(f func(io.Closer)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.open {
		f(c)
	}
}

// dial is a net.Dialer's DialContext over the link.
func (l *cutLink) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if l.isCut() {
		return nil, errNoRoute(network)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if !l.opened(c) {
		return nil, errNoRoute(network)
	}
	return c, nil
}
