package proctcp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// littleEndian: the sample tables below are a little-endian host's.
func littleEndian(t *testing.T) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the sample tables are a little-endian host's")
	}
}

// Taken from a real host: an IPv4 client 127.0.0.1:51274 of uid 1000 to
// a dual-stack listener (the server's end is in tcp6, IPv4-mapped), and
// an IPv6 client [::1]:34462 of uid 65534 to [::1]:47905.
const (
	sampleTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1578 1 000000006273e6f0 100 0 0 10 0
   1: 0100007F:87CB 0100007F:E3F8 06 00000000:00000000 03:000012CE 00000000     0        0 0 3 00000000cde8ddee
  89: 0100007F:C84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000  1000        0 12089560 2 000000007dd39a45 20 0 0 10 -1
`
	sampleTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:BB21 00000000000000000000000000000000:0000 0A 00000000:00000001 00:00000000 00000000     0        0 12089557 2 00000000dd8e4794 100 0 0 10 0
   2: 00000000000000000000000001000000:BB21 00000000000000000000000001000000:869E 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000065da1c08 20 0 0 10 -1
   3: 0000000000000000FFFF00000100007F:A739 0000000000000000FFFF00000100007F:C84A 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000074064de2 20 0 0 10 -1
   4: 00000000000000000000000001000000:869E 00000000000000000000000001000000:BB21 01 00000000:00000000 00:00000000 00000000 65534        0 12089558 2 0000000088cde6a3 20 0 0 10 -1
`
)

func TestFindSocketUID(t *testing.T) {
	littleEndian(t)
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name, table   string
		local, remote netip.AddrPort
		uid           uint32
		found         bool
	}{
		{"IPv4 client", sampleTCP, ap("127.0.0.1:51274"), ap("127.0.0.1:42809"), 1000, true},
		{"the server's end of it, IPv4-mapped in tcp6", sampleTCP6, ap("127.0.0.1:42809"), ap("127.0.0.1:51274"), 0, true},
		{"IPv6 client", sampleTCP6, ap("[::1]:34462"), ap("[::1]:47905"), 65534, true},
		{"the IPv6 server's end", sampleTCP6, ap("[::1]:47905"), ap("[::1]:34462"), 0, true},
		{"a time-wait entry (no uid of its own)", sampleTCP, ap("127.0.0.1:34763"), ap("127.0.0.1:58360"), 0, true},
		{"ports swapped", sampleTCP, ap("127.0.0.1:42809"), ap("127.0.0.1:51274"), 0, false},
		{"another address", sampleTCP, ap("127.0.0.2:51274"), ap("127.0.0.1:42809"), 0, false},
		{"header only", "  sl  local_address rem_address   st\n", ap("127.0.0.1:1"), ap("127.0.0.1:2"), 0, false},
		{"empty", "", ap("127.0.0.1:1"), ap("127.0.0.1:2"), 0, false},
	} {
		uid, found, err := FindUID(strings.NewReader(tc.table), tc.local, tc.remote)
		if err != nil || found != tc.found || uid != tc.uid {
			t.Errorf("%s: got uid %d found %v err %v, want uid %d found %v", tc.name, uid, found, err, tc.uid, tc.found)
		}
	}
}

// A line the parser cannot read is an error naming what is wrong with
// it, never a panic; FindUID names the line, when it is the one
// sought.
func TestParseSocketLineBadLines(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"   0: 0100007F:C84A", "2 fields, want at least 8"},
		{"   0: 0100007FC84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000 0 0", "local address: no port"},
		{"   0: 0100007F:C84 0100007F:A739 01 00000000:00000000 00:00000000 00000000 0 0", `local address: port "C84" is not 4 hexadecimal digits`},
		{"   0: 0100007F:C8G4 0100007F:A739 01 00000000:00000000 00:00000000 00000000 0 0", `local address: port "C8G4"`},
		{"   0: 0100007:C84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000 0 0", `local address: address "0100007" is not 8 or 32 hexadecimal digits`},
		{"   0: 0100007F:C84A 0100-07F:A739 01 00000000:00000000 00:00000000 00000000 0 0", `remote address: address "0100-07F"`},
		{"   0: 0100007F:C84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000 -1 0", "uid: "},
		{"   0: 0100007F:C84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000 4294967296 0", "uid: "},
		{"   0: 0100007F:C84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000 +0 0", "uid: "},
		{"   0: 0x00007F:C84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000 0 0", "local address: address"},
		{"   0: 0100007F:+84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000 0 0", `local address: port "+84A"`},
	} {
		if _, _, _, err := ParseLine([]byte(tc.line)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.line, err, tc.want)
		}
	}
	littleEndian(t)
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	ap := netip.MustParseAddrPort
	for _, tc := range []struct{ table, want string }{
		{header + "   7: 0100007F:C84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000 -1 0\n", `line 2 "   7: 0100007F:C84A`},
		{header + "   7: 0100007F:C84A " + strings.Repeat("0", 5000) + "\n", "token too long"},
	} {
		_, found, err := FindUID(strings.NewReader(tc.table), ap("127.0.0.1:51274"), ap("127.0.0.1:42809"))
		if err == nil || found || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got found %v err %v, want an error with %q", found, err, tc.want)
		}
	}
	// A bad line that is not the one sought is passed over.
	if _, found, err := FindUID(strings.NewReader(header+"   0: garbage\n"+sampleTCP[len(header):]), ap("127.0.0.1:51274"), ap("127.0.0.1:42809")); err != nil || !found {
		t.Errorf("a bad line before the one sought: found %v err %v", found, err)
	}
}

// BenchmarkFindSocketUID reads a table of 10,000 sockets to its end (the
// socket is not there: the most an accept costs with that many sockets on
// the host).
func BenchmarkFindSocketUID(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
	for i := range 10000 {
		fmt.Fprintf(&sb, "%4d: 0100007F:%04X 0100007F:6D0C 01 00000000:00000000 02:000ADE3F 00000000     0        0 12080922 2 0000000018851806 20 4 28 17 -1\n", i, 1024+i)
	}
	table := sb.String()
	local, remote := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")
	b.SetBytes(int64(len(table)))
	for b.Loop() {
		if _, found, err := FindUID(strings.NewReader(table), local, remote); found || err != nil {
			b.Fatal(found, err)
		}
	}
}
