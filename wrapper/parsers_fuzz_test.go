package wrapper

import (
	"net"
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
