package probe

import (
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

func dupSocket(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }

// tcpStates names the kernel's TCP states (include/net/tcp_states.h).
var tcpStates = map[uint8]string{
	1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 6: "TIME_WAIT",
	7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING",
}

// socketState: " from=<local address> tcp=<state> syns=<segments sent>"
// of a connecting TCP socket (in SYN_SENT every segment it sent is a SYN).
func socketState(fd int) string {
	s := ""
	if sa, err := unix.Getsockname(fd); err == nil {
		switch in := sa.(type) {
		case *unix.SockaddrInet4:
			s += " from=" + net.JoinHostPort(net.IP(in.Addr[:]).String(), strconv.Itoa(in.Port))
		case *unix.SockaddrInet6:
			s += " from=" + net.JoinHostPort(net.IP(in.Addr[:]).String(), strconv.Itoa(in.Port))
		}
	}
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return s + " tcp=" + err.Error()
	}
	state, ok := tcpStates[info.State]
	if !ok {
		state = strconv.Itoa(int(info.State))
	}
	s += " tcp=" + state
	if info.State == 2 {
		s += fmt.Sprintf(" syns=%d", info.Segs_out)
	}
	return s
}
