package wrapper

import (
	"fmt"
	"net/http"
	"net/http/httputil"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// newProxy forwards the requests forwardDenied lets through to the upstream
// apiserver with the wrapper's own credentials and no client identity,
// streaming responses as they come (FlushInterval -1) so watches pass
// through unchanged.
func newProxy(cfg *rest.Config) (http.Handler, error) {
	target, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("upstream URL: %w", err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("upstream transport: %w", err)
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			stripIdentity(pr.Out.Header)
		},
		Transport:     transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			klog.FromContext(req.Context()).V(2).Info("Upstream request failed", "method", req.Method, "path", req.URL.Path, "err", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}, nil
}
