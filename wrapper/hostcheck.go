package wrapper

import (
	"net"
	"net/http"
	"slices"
	"strings"
)

// withHostCheck answers 421 to a request whose Host is not a name the
// wrapper is reached by. A web page on the node can make a browser send
// requests to 127.0.0.1:51006 under a host name the attacker's DNS
// resolves there (DNS rebinding); the browser then lets the page read the
// answers, which without this check would be the cluster's Services and
// this Node. Loopback addresses and "localhost" are always accepted, plus
// allowed ("*" accepts any Host: for a wrapper on a non-loopback address,
// where the client certificate is what admits a client).
func withHostCheck(next http.Handler, allowed []string) http.Handler {
	if slices.Contains(allowed, "*") {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !hostAllowed(req.Host, allowed) {
			http.Error(w, "the application-grid-wrapper is not served under the host name "+req.Host, http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// hostAllowed: host (host or host:port, as in a Host header) names a
// loopback address, localhost, or one of allowed; or is empty (HTTP/1.0,
// which no browser sends).
func hostAllowed(host string, allowed []string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range allowed {
		if strings.EqualFold(host, a) {
			return true
		}
	}
	return false
}
