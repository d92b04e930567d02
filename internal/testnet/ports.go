package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are handed out from [portsFrom, portsTo): below the NodePort range
// (30000-32767, which a real kube-proxy in a test may program) and so below
// the kernel's default ephemeral range (32768-60999). A port the kernel
// picked with :0 is an ephemeral one: between the test choosing it and the
// server binding it, any outgoing connection on the machine may take it as
// its source port, and a client dialling it while nothing listens may even
// connect to itself (TCP simultaneous open) and hold it. Both made tests
// fail with "address already in use".
const (
	portsFrom = 16384
	portsTo   = 30000
)

var ports struct {
	sync.Mutex
	next int // 0 until the first call picks a random start
}

// FreePort returns a port free on host for TCP, and for UDP too when udp is
// set, that no outgoing connection can take (see portsFrom). Successive
// calls in one process walk the range from a random start, so they do not
// return a port twice until the range wraps, and two test processes rarely
// meet. It falls back to a kernel-chosen port when the ephemeral range on
// this machine overlaps the range.
func FreePort(host string, udp bool) (int, error) {
	if low, err := ephemeralLow(); err != nil || low < portsTo {
		return kernelPort(host, udp)
	}
	ports.Lock()
	defer ports.Unlock()
	if ports.next == 0 {
		ports.next = portsFrom + rand.IntN(portsTo-portsFrom)
	}
	for range portsTo - portsFrom {
		port := ports.next
		if ports.next++; ports.next == portsTo {
			ports.next = portsFrom
		}
		if free(host, port, udp) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s in [%d, %d)", host, portsFrom, portsTo)
}

// free tells whether host:port can be bound now.
func free(host string, port int, udp bool) bool {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	if !udp {
		return true
	}
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// kernelPort is a port the kernel picks, free for both protocols when udp
// is set.
func kernelPort(host string, udp bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !udp || free(host, port, true) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free TCP and UDP port on %s", host)
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("ip_local_port_range: %q", b)
	}
	return strconv.Atoi(f[0])
}
