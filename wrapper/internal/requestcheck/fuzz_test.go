package requestcheck

import (
	"net"
	"net/url"
	"path"
	"strings"
	"testing"
)

// hack/fuzz-smoke.sh runs these in `make test`.

// Without names of its own, a Host is accepted only when it names a
// loopback address or localhost (or is empty).
func FuzzHostAllowed(f *testing.F) {
	for _, h := range []string{"", "127.0.0.1:51006", "[::1]:51006", "localhost", "LOCALHOST.", "evil.example", "127.0.0.1.evil.example", "[::ffff:127.0.0.1]", "0x7f.1", "2130706433", "[fe80::1%lo]:1", "localhost:80:80"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !HostAllowed(host, nil) || host == "" {
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
		if err != nil || PathError(u) != nil {
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
