package probe

import (
	"fmt"
	"net/http/httptrace"
	"sync"
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
}

func newRequestTrace(start time.Time) *requestTrace { return &requestTrace{start: start} }

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
