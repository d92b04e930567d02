package wrapper

import (
	"net/http"
	"slices"

	"github.com/servicegroup/servicegroup/wrapper/internal/requestcheck"
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
		if !requestcheck.HostAllowed(req.Host, allowed) {
			http.Error(w, "the application-grid-wrapper is not served under the host name "+req.Host, http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, req)
	})
}
