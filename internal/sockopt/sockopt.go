// Package sockopt sets socket options from the Control hook of a
// net.Dialer or net.ListenConfig, which runs after the socket is made and
// before it connects or binds (options such as SO_REUSEPORT and SO_RCVBUF
// only work then).
package sockopt

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Int is a Control hook that sets the integer option (level, name) to value.
func Int(level, name, value int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var setErr error
		if err := c.Control(func(fd uintptr) {
			setErr = unix.SetsockoptInt(int(fd), level, name, value)
		}); err != nil {
			return err
		}
		return setErr
	}
}
