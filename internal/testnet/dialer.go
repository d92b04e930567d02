// Package testnet holds network helpers shared by tests.
package testnet

import (
	"net"

	"golang.org/x/sys/unix"

	"github.com/servicegroup/servicegroup/internal/sockopt"
)

// TinyReceiveBufferDialer dials sockets with a fixed 4 KiB receive buffer
// (setting SO_RCVBUF turns off autotuning): once the client stops reading,
// the server's writes block as soon as its own send buffer is full, whatever
// the kernel's buffer sizes.
func TinyReceiveBufferDialer() *net.Dialer {
	return &net.Dialer{Control: sockopt.Int(unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)}
}
