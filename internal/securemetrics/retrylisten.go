package securemetrics

import (
	"context"
	"net"
	"time"
)

// RetryListen is an Options.Listen for a component that must not exit while
// another process holds its port (a host-network pod on an edge node, where
// any local user may bind a port above 1024 first): it tries every interval
// until the port is free or ctx ends, calling waiting with the first error
// and with each different one after it.
func RetryListen(interval time.Duration, waiting func(error)) func(context.Context, func() (net.Listener, error)) (net.Listener, error) {
	return func(ctx context.Context, listen func() (net.Listener, error)) (net.Listener, error) {
		var last string
		for {
			ln, err := listen()
			if err == nil {
				return ln, nil
			}
			if err.Error() != last {
				last = err.Error()
				waiting(err)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(interval):
			}
		}
	}
}
