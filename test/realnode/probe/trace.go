package probe

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"sync"
	"syscall"
	"time"
)

// requestTrace records how far a request got, for a failure's detail: a
// connection never made (SYNs lost, or no route) points at the data path,
// one made but never answered at the server or the way back.
type requestTrace struct {
	start time.Time

	mu        sync.Mutex
	connected time.Duration // when the TCP connection was made; 0: not made
	local     string        // its local address (the conntrack entry's)
	wrote     time.Duration // when the request was written
	// sock is a duplicate of the connection's socket, taken before its
	// connect (dialControl): a handshake still unfinished at the deadline
	// is read from it then (local address, the kernel's TCP state), after
	// the dial has closed its own descriptor. -1: none; closed once the
	// request is over (done), and none taken after that.
	sock int
	done bool
}

func newRequestTrace(start time.Time) *requestTrace {
	return &requestTrace{start: start, sock: -1}
}

func (r *requestTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.connected = time.Since(r.start)
			r.local = info.Conn.LocalAddr().String()
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.wrote = time.Since(r.start)
		},
	}
}

// traceKey carries a request's trace to its dial (the transport dials
// with a context holding the request's values).
type traceKey struct{}

// dialControl is the dialer's ControlContext: it keeps a duplicate of the
// socket in the request's trace.
func dialControl(ctx context.Context, _, _ string, c syscall.RawConn) error {
	r, ok := ctx.Value(traceKey{}).(*requestTrace)
	if !ok {
		return nil
	}
	return c.Control(func(fd uintptr) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.done || r.sock >= 0 {
			return
		}
		if dup, err := dupSocket(int(fd)); err == nil {
			r.sock = dup
		}
	})
}

// close ends the trace: the socket's duplicate is closed.
func (r *requestTrace) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
	if r.sock >= 0 {
		_ = syscall.Close(r.sock)
		r.sock = -1
	}
}

// String: "connected=no", or "connected=<after> from=<local address>
// wrote=<after>".
func (r *requestTrace) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.connected == 0 {
		return "connected=no"
	}
	s := fmt.Sprintf("connected=%s from=%s", r.connected.Round(time.Millisecond), r.local)
	if r.wrote > 0 {
		s += " wrote=" + r.wrote.Round(time.Millisecond).String()
	}
	return s
}

// handshake: for a request that timed out before it got its connection,
// what the kernel had of it then, " from=<local address> tcp=<state>
// syns=<sent>" (socketState): SYN_SENT means no SYN-ACK reached the client
// (a SYN or its answer lost on the way, the local port naming the flow in
// the nodes' conntrack tables), ESTABLISHED that the handshake had
// completed and only the prober was late to take it. Empty when the
// connection was made or the socket is unknown.
func (r *requestTrace) handshake() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.connected != 0 || r.sock < 0 {
		return ""
	}
	return socketState(r.sock)
}
