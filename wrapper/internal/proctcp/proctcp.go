// Package proctcp reads the kernel's tables of TCP sockets,
// /proc/net/tcp and /proc/net/tcp6: which uid owns the socket at one end
// of a local connection. It is apart from the wrapper so that fuzzing its
// parser compiles only what the parser needs.
package proctcp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
)

// FindUID reads a /proc/net/tcp or /proc/net/tcp6 table and returns
// the uid of the socket whose local address is local and remote address
// remote (an IPv4 pair also as IPv4-mapped IPv6). Only a line whose
// addresses read as the pair's is parsed in full (a table holds every
// socket of the host); if it cannot be read, the error names it.
func FindUID(table io.Reader, local, remote netip.AddrPort) (uid uint32, found bool, err error) {
	var want [][2][]byte
	if local.Addr().Is4() && remote.Addr().Is4() {
		want = append(want, [2][]byte{kernelHex(local, 8), kernelHex(remote, 8)})
	}
	want = append(want, [2][]byte{kernelHex(local, 32), kernelHex(remote, 32)})
	sc := bufio.NewScanner(table)
	sc.Buffer(make([]byte, 0, 512), 4096)
	for n := 1; sc.Scan(); n++ {
		if n == 1 {
			continue // the header
		}
		line := sc.Bytes()
		l, rest := nextField(line) // "sl:"
		l, rest = nextField(rest)
		r, _ := nextField(rest)
		if !slices.ContainsFunc(want, func(w [2][]byte) bool { return bytes.EqualFold(l, w[0]) && bytes.EqualFold(r, w[1]) }) {
			continue
		}
		pl, pr, u, err := ParseLine(line)
		if err != nil {
			return 0, false, fmt.Errorf("line %d %q: %w", n, truncate(line, 80), err)
		}
		if pl == local && pr == remote {
			return u, true, nil
		}
	}
	return 0, false, sc.Err()
}

// nextField is b's first space-separated field and what follows it.
func nextField(b []byte) (field, rest []byte) {
	b = bytes.TrimLeft(b, " \t")
	end := bytes.IndexAny(b, " \t")
	if end < 0 {
		return b, nil
	}
	return b[:end], b[end:]
}

// kernelHex writes ap as the kernel does in /proc/net/tcp (width 8, IPv4
// only) or tcp6 (32, IPv4 as IPv4-mapped): each 32-bit word of the
// address in this host's byte order, then the port, in hexadecimal.
func kernelHex(ap netip.AddrPort, width int) []byte {
	raw := ap.Addr().As16()
	words := raw[16-width/2:]
	out := make([]byte, 0, width+5)
	for i := 0; i < len(words); i += 4 {
		out = fmt.Appendf(out, "%08X", binary.NativeEndian.Uint32(words[i:]))
	}
	return fmt.Appendf(out, ":%04X", ap.Port())
}

// ParseLine reads one entry of /proc/net/tcp{,6}:
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid ...
//	 0: 0100007F:C76E 0100007F:C736 01 00000000:00000000 00:00000000 00000000     0 ...
//
// Addresses are the kernel's 32-bit words in hexadecimal, each in this
// host's byte order, the port big-endian hexadecimal; uid is decimal.
func ParseLine(line []byte) (local, remote netip.AddrPort, uid uint32, err error) {
	fields := bytes.Fields(line)
	if len(fields) < 8 {
		return local, remote, 0, fmt.Errorf("%d fields, want at least 8", len(fields))
	}
	if local, err = parseHexAddrPort(fields[1]); err != nil {
		return local, remote, 0, fmt.Errorf("local address: %w", err)
	}
	if remote, err = parseHexAddrPort(fields[2]); err != nil {
		return local, remote, 0, fmt.Errorf("remote address: %w", err)
	}
	u, err := strconv.ParseUint(string(fields[7]), 10, 32)
	if err != nil {
		return local, remote, 0, fmt.Errorf("uid: %w", err)
	}
	return local, remote, uint32(u), nil
}

// parseHexAddrPort reads ADDR:PORT as /proc/net/tcp{,6} write them: 8 or
// 32 hexadecimal digits, a colon, 4.
func parseHexAddrPort(f []byte) (netip.AddrPort, error) {
	colon := bytes.IndexByte(f, ':')
	if colon < 0 {
		return netip.AddrPort{}, errors.New("no port")
	}
	hexAddr, hexPort := f[:colon], f[colon+1:]
	if len(hexPort) != 4 {
		return netip.AddrPort{}, fmt.Errorf("port %q is not 4 hexadecimal digits", hexPort)
	}
	port, err := strconv.ParseUint(string(hexPort), 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", hexPort, err)
	}
	var raw [16]byte
	switch len(hexAddr) {
	case 8, 32:
	default:
		return netip.AddrPort{}, fmt.Errorf("address %q is not 8 or 32 hexadecimal digits", hexAddr)
	}
	for i := 0; i < len(hexAddr); i += 8 {
		word, err := strconv.ParseUint(string(hexAddr[i:i+8]), 16, 32)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("address %q: %w", hexAddr, err)
		}
		binary.NativeEndian.PutUint32(raw[i/2:], uint32(word))
	}
	var addr netip.Addr
	if len(hexAddr) == 8 {
		addr = netip.AddrFrom4([4]byte(raw[:4]))
	} else {
		addr = netip.AddrFrom16(raw).Unmap()
	}
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
