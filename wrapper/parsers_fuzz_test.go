package wrapper

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// The parsers of what reaches the wrapper from the network or from objects
// others write: the Host rule, the path check before forwarding, and the
// local-endpoint annotations. hack/fuzz-smoke.sh runs each in `make test`.

// Without names of its own, a Host is accepted only when it names a
// loopback address or localhost (or is empty).
func FuzzHostAllowed(f *testing.F) {
	for _, h := range []string{"", "127.0.0.1:51006", "[::1]:51006", "localhost", "LOCALHOST.", "evil.example", "127.0.0.1.evil.example", "[::ffff:127.0.0.1]", "0x7f.1", "2130706433", "[fe80::1%lo]:1", "localhost:80:80"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !hostAllowed(host, nil) || host == "" {
			return
		}
		h := host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			h = hh
		}
		h = strings.TrimSuffix(strings.ToLower(h), ".")
		if h == "localhost" {
			return
		}
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil && ip.IsLoopback() {
			return
		}
		t.Fatalf("Host %q accepted: it names neither a loopback address nor localhost", host)
	})
}

// A path the check lets through means, decoded and resolved, exactly what
// was checked: no segment is empty, "." or "..", or holds a "/".
func FuzzPathError(f *testing.F) {
	for _, p := range []string{"/api/v1/services", "/apis/%2e%2e/api", "/api//v1", "/api/v1/namespaces/a%2fb", "/a/%252e%252e", "/", "/api/./v1", "/%zz"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil || pathError(u) != nil {
			return
		}
		decoded, err := url.PathUnescape(u.EscapedPath())
		if err != nil {
			t.Fatalf("%q accepted but does not decode: %v", raw, err)
		}
		trimmed := strings.TrimSuffix(decoded, "/")
		if trimmed == "" {
			return
		}
		if c := path.Clean(trimmed); c != trimmed {
			t.Fatalf("%q accepted but resolves to %q, not %q", raw, c, trimmed)
		}
		if strings.Count(strings.Trim(decoded, "/"), "/") != strings.Count(strings.Trim(u.EscapedPath(), "/"), "/") {
			t.Fatalf("%q accepted but a segment decodes to a slash", raw)
		}
	})
}

// An accepted local endpoint is an address without zone and a port in
// 1-65535, and reads back the same from the annotations it would write.
func FuzzParseLocalEndpoint(f *testing.F) {
	f.Add("127.0.0.1", "51003", true, true)
	f.Add("::ffff:169.254.20.11", "443", true, true)
	f.Add("fe80::1%eth0", "1", true, true)
	f.Add("0.0.0.0", "65536", true, false)
	f.Fuzz(func(t *testing.T, ip, port string, hasIP, hasPort bool) {
		a := map[string]string{}
		if hasIP {
			a[superedgev1.AnnotationLocalEndpoint] = ip
		}
		if hasPort {
			a[superedgev1.AnnotationLocalPort] = port
		}
		le, found, err := ParseLocalEndpoint(a)
		if found != (hasIP || hasPort) {
			t.Fatalf("found %v for %v", found, a)
		}
		if err != nil || !found {
			return
		}
		if !le.IP.IsValid() || le.IP.Zone() != "" || le.IP.IsUnspecified() || le.IP.Is4In6() || le.Port < 1 || le.Port > 65535 {
			t.Fatalf("%v read as %v:%d", a, le.IP, le.Port)
		}
		again, _, err := ParseLocalEndpoint(map[string]string{
			superedgev1.AnnotationLocalEndpoint: le.IP.String(), superedgev1.AnnotationLocalPort: strconv.Itoa(int(le.Port)),
		})
		if err != nil || again != le {
			t.Fatalf("%v read as %v, which reads back as %v (%v)", a, le, again, err)
		}
	})
}

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
		_, _, _ = findSocketUID(strings.NewReader("header\n"+line), netip.AddrPort{}, netip.AddrPort{})
		local, remote, uid, err := parseSocketLine([]byte(line))
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
