package wrapper

import (
	"errors"
	"net"
	"net/http"
	"syscall"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// resumeWatchesAcrossOutages makes an unreachable upstream look to
// client-go like one that refuses connections. client-go's reflector
// retries a watch that cannot connect from its resourceVersion, with its
// jittered backoff (0.8s doubling to 30s, jitter 1.0), only when the
// connection was refused; any other dial error (no route to host, a dial
// timeout: what a cut cloud link gives) ends the watch and the next try is
// a full relist. After an outage every edge node would then pull every
// Service and EndpointSlice again at once; with this, each resumes its
// watches and receives only what changed, and relists only when the
// apiserver answers that the version is too old. The error keeps its own
// text.
func resumeWatchesAcrossOutages(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return unreachableAsRefused{rt} })
	return c
}

// resumeWatchesOnDialErrors is off only in the benchmark that measures what
// it saves.
var resumeWatchesOnDialErrors = true

type unreachableAsRefused struct{ http.RoundTripper }

func (u unreachableAsRefused) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.RoundTripper.RoundTrip(r)
	var op *net.OpError
	if err != nil && errors.As(err, &op) && op.Op == "dial" && !utilnet.IsConnectionRefused(err) {
		err = &upstreamUnreachable{err: err}
	}
	return resp, err
}

// upstreamUnreachable is a dial error that also reads as ECONNREFUSED.
type upstreamUnreachable struct{ err error }

func (e *upstreamUnreachable) Error() string   { return e.err.Error() }
func (e *upstreamUnreachable) Unwrap() []error { return []error{syscall.ECONNREFUSED, e.err} }
