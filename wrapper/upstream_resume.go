package wrapper

import (
	"net/http"
	"syscall"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// resumeWatchesAcrossOutages makes a watch request that gets no answer
// from upstream look to client-go like one whose connection was refused.
// client-go's reflector resumes a watch from its resourceVersion, with its
// jittered backoff (0.8s doubling to 30s, jitter 1.0), only when the
// connection was refused (or on a 429); any other error before an answer
// (no route to host or a dial timeout, what a cut cloud link gives; a TLS
// handshake timeout, what a crowded apiserver gives when every edge node
// comes back at once) ends the watch, and the next try is a full relist.
// After an outage every edge node would then pull every Service and
// EndpointSlice again at once; with this each resumes its watches and
// receives only what changed, and relists only when the apiserver answers
// that the version is too old. Only watches: client-go retries a failed
// list in any case. The error keeps its own text.
func resumeWatchesAcrossOutages(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return unansweredWatchAsRefused{rt} })
	return c
}

// resumeUnansweredWatches is off only in the benchmark that measures what
// it saves.
var resumeUnansweredWatches = true

type unansweredWatchAsRefused struct{ http.RoundTripper }

func (u unansweredWatchAsRefused) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.RoundTripper.RoundTrip(r)
	if err != nil && watchcache.IsWatch(r) && !utilnet.IsConnectionRefused(err) {
		err = &upstreamUnanswered{err: err}
	}
	return resp, err
}

// upstreamUnanswered is an error before any answer that also reads as
// ECONNREFUSED.
type upstreamUnanswered struct{ err error }

func (e *upstreamUnanswered) Error() string   { return e.err.Error() }
func (e *upstreamUnanswered) Unwrap() []error { return []error{syscall.ECONNREFUSED, e.err} }
