package wrapper

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// listenRetry is how often a taken port is tried again.
const listenRetry = time.Second

// Listen binds addr with listen (net.Listen("tcp", addr) when nil). While
// another process holds the port (a restart, an OOM kill or a roll left it
// free for a moment and something took it) it keeps trying instead of
// exiting into a crash loop, logs it, and /readyz names it; it returns as
// soon as the port is free, or with ctx's error. Clients that pin the
// wrapper's certificate refuse the other process meanwhile. Other errors
// are returned at once.
func (s *Server) Listen(ctx context.Context, addr string, listen func() (net.Listener, error)) (net.Listener, error) {
	if listen == nil {
		listen = func() (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	logger := klog.FromContext(ctx)
	var since time.Time
	lastLog := time.Time{}
	for {
		ln, err := listen()
		if err == nil {
			if !since.IsZero() {
				s.ready.Block(addr, "")
				logger.Info("Port free again, serving", "address", addr, "takenFor", time.Since(since).Round(time.Second))
			}
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
		if since.IsZero() {
			since = time.Now()
			s.ready.Block(addr, addr+" is in use by another process: not serving there until it is free (clients that pin the wrapper's certificate refuse that process)")
		}
		if time.Since(lastLog) >= time.Minute {
			lastLog = time.Now()
			logger.Error(err, "Another process holds the wrapper's port; retrying every second", "address", addr, "takenFor", time.Since(since).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(listenRetry):
		}
	}
}
