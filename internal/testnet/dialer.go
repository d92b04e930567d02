// Package testnet holds network helpers shared by tests.
package testnet

import (
	"net"
	"syscall"
)

// TinyReceiveBufferDialer dials sockets with a fixed 4 KiB receive buffer
// (setting SO_RCVBUF turns off autotuning): once the client stops reading,
// the server's writes block as soon as its own send buffer is full, whatever
// the kernel's buffer sizes.
func TinyReceiveBufferDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
}
