package testnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	// claims are the lock files of the ports this process handed out,
	// open (and so locked) until it exits.
	claims []*os.File
}

// claimDir holds a lock file per port handed out. Free at the moment of
// the check is not enough: between a test choosing a port and its server
// binding it, another test process may choose the same one (two in a
// `make test` from a fresh machine did, 2026-12-05: a kube-apiserver
// found its port taken, and two CoreDNS of different tests shared one
// through SO_REUSEPORT, each answering the other's queries). A port's
// lock is held by the process that chose it until that process exits,
// and the kernel drops it then, however the process ends.
var claimDir = filepath.Join(os.TempDir(), "servicegroup-ports")

// makeClaimDir makes claimDir, once per process.
var makeClaimDir = sync.OnceValue(func() error { return os.MkdirAll(claimDir, 0o1777) })

// claim takes port's lock for this process; false when another process
// (or this one, earlier) holds it.
func claim(port int) (bool, error) {
	if err := makeClaimDir(); err != nil {
		return false, err
	}
	f, err := os.OpenFile(filepath.Join(claimDir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	ports.claims = append(ports.claims, f)
	return true, nil
}

// FreePort returns a port free on host for TCP, and for UDP too when udp is
// set, that no outgoing connection can take (see portsFrom) and no other
// test process has chosen (see claimDir). Successive calls in one process
// walk the range from a random start. It falls back to a kernel-chosen
// port when the ephemeral range on this machine overlaps the range.
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
		if !free(host, port, udp) {
			continue
		}
		switch ok, err := claim(port); {
		case err != nil:
			return 0, fmt.Errorf("claim port %d: %w", port, err)
		case ok:
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
