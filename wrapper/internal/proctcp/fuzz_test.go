package proctcp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// hack/fuzz-smoke.sh runs this in `make test`.

// A line of /proc/net/tcp{,6} the parser accepts says, written back as the
// kernel writes it (each 32-bit word of the address in this host's byte
// order, at the width it came in), exactly what was read; no input makes
// it panic.
func FuzzParseSocketLine(f *testing.F) {
	for _, l := range []string{
		"  89: 0100007F:C84A 0100007F:A739 01 00000000:00000000 00:00000000 00000000  1000        0 12089560 2 000000007dd39a45 20 0 0 10 -1",
		"   3: 0000000000000000FFFF00000100007F:A739 0000000000000000FFFF00000100007F:C84A 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0",
		"   4: 00000000000000000000000001000000:869E 00000000000000000000000001000000:BB21 01 00000000:00000000 00:00000000 00000000 65534 0 1 2",
		"   0: 0100007F:C84A 0100007F:A739 01 0 0 0 4294967295",
		"   0: 0100007f:c84a 0100007f:a739 01 0 0 0 0", "0: :: :", "",
	} {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, _, _ = FindUID(strings.NewReader("header\n"+line), netip.AddrPort{}, netip.AddrPort{})
		local, remote, uid, err := ParseLine([]byte(line))
		if err != nil {
			return
		}
		fields := strings.Fields(line)
		for i, ap := range []netip.AddrPort{local, remote} {
			in := fields[1+i]
			width := strings.IndexByte(in, ':')
			if out := kernelAddrPort(ap, width); !strings.EqualFold(out, in) {
				t.Fatalf("%q: field %q read as %v, which the kernel writes %q", line, in, ap, out)
			}
		}
		if strconv.FormatUint(uint64(uid), 10) != strings.TrimLeft(fields[7], "0") && !(uid == 0 && strings.Trim(fields[7], "0") == "") {
			t.Fatalf("%q: uid %q read as %d", line, fields[7], uid)
		}
	})
}

// kernelAddrPort writes ap as /proc/net/tcp (width 8) or tcp6 (32) do.
func kernelAddrPort(ap netip.AddrPort, width int) string {
	var b strings.Builder
	raw := ap.Addr().As16()
	words := raw[:]
	if width == 8 {
		words = words[12:]
	}
	for i := 0; i < len(words); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(words[i:]))
	}
	fmt.Fprintf(&b, ":%04X", ap.Port())
	return b.String()
}
