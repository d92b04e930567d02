package wrapper

import (
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"

	"github.com/servicegroup/servicegroup/wrapper/internal/requestcheck"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// Defaults of the bounds on what clients may hold.
const (
	// DefaultRequestWriteTimeout: a get or list answer not taken by its
	// client within this is cut off.
	DefaultRequestWriteTimeout = 60 * time.Second
	// DefaultMaxRequestsInFlight: each request but a watch may pin the
	// encoded answer (a list of every Service or EndpointSlice) until its
	// write deadline; kube-proxy makes a handful at once.
	DefaultMaxRequestsInFlight = 20
	// DefaultMaxWatches: a watch costs a cursor and one batch of events;
	// kube-proxy holds four or five.
	DefaultMaxWatches = 100
	// DefaultMaxRequestsInFlightPerUID and DefaultMaxWatchesPerUID are
	// what one local user other than root may hold (clientbudget.go): a
	// quarter of the totals, so that root (kube-proxy and the node's
	// CoreDNS) keeps at least as much whatever one or more other users do.
	DefaultMaxRequestsInFlightPerUID = DefaultMaxRequestsInFlight / 4
	DefaultMaxWatchesPerUID          = DefaultMaxWatches / 4
)

// withLimits is the chain in front of the views: the path check, the
// request's RequestInfo (apiserver's parser), then apiserver's max-in-flight filter
// twice, once for watches and once for everything else, each answering 429
// with Retry-After when full; inside those totals, each local user's
// budget of both (clientbudget.go); and a write deadline on every answer
// but a watch's (watches have their own per batch).
func withLimits(next http.Handler, opts Options) http.Handler {
	writeTimeout, maxInFlight, maxWatches := opts.RequestWriteTimeout, opts.MaxRequestsInFlight, opts.MaxWatches
	isWatch := func(_ *http.Request, info *request.RequestInfo) bool { return info.Verb == "watch" }
	notWatch := func(r *http.Request, info *request.RequestInfo) bool { return !isWatch(r, info) }
	deadline := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if info, ok := request.RequestInfoFrom(req.Context()); ok && info.Verb != "watch" {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
		}
		next.ServeHTTP(w, req)
	})
	perClient := withClientBudgets(deadline,
		newClientBudgets("watches", maxWatches, opts.MaxWatchesPerUID),
		newClientBudgets("requests", maxInFlight, opts.MaxRequestsInFlightPerUID))
	limited := genericfilters.WithMaxInFlightLimit(perClient, maxInFlight, maxInFlight, isWatch)
	limited = genericfilters.WithMaxInFlightLimit(limited, maxWatches, 0, notWatch)
	withInfo := watchcache.WithRequestInfo(limited)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := requestcheck.PathError(req.URL); err != nil {
			watchcache.LabelRequest(w, "denied", "denied")
			watchcache.WriteError(w, req, err)
			return
		}
		withInfo.ServeHTTP(w, req)
	})
}
