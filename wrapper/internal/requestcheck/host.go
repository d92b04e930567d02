// Package requestcheck holds the wrapper's checks of what a request names
// before anything else reads it: its Host and its path. It is apart from
// the wrapper so that fuzzing them compiles only what they need.
package requestcheck

import (
	"net"
	"strings"
)

// HostAllowed: host (host or host:port, as in a Host header) names a
// loopback address, localhost, or one of allowed; or is empty (HTTP/1.0,
// which no browser sends).
func HostAllowed(host string, allowed []string) bool {
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
