package wrapper

import (
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Everything the wrapper forwards upstream runs with the wrapper's own
// credentials, and anything on the node may reach the wrapper's port. So it
// forwards only what kube-proxy asks for besides what the wrapper serves
// itself (TestKubeProxyVersions checks v1.35.4, v1.36.4 and v1.37.1 need
// nothing else), and never lets a client choose an identity.
var forwardable = map[schema.GroupResource]sets.Set[string]{
	// Events about the node and Services (core/v1 before the events.k8s.io
	// recorder, events.k8s.io/v1 since).
	{Group: "", Resource: "events"}:              sets.New("create", "update", "patch"),
	{Group: "events.k8s.io", Resource: "events"}: sets.New("create", "update", "patch"),
	// ServiceCIDRs: kube-proxy 1.31+ watches them. v1 is served from the
	// wrapper's store (servicecidrs.go) except when upstream does not serve
	// it or a snapshot without them is served.
	{Group: "networking.k8s.io", Resource: "servicecidrs"}: sets.New("get", "list", "watch"),
}

// identityHeaders are stripped from forwarded requests: upstream
// authenticates the wrapper, never a client. Impersonate-* is refused
// outright (see forwardDenied).
var identityHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// identityHeaderPrefixes: the apiserver's request-header authentication
// (front proxies).
var identityHeaderPrefixes = []string{"X-Remote-"}

var errNotForwarded = errors.New("the application-grid-wrapper forwards only what kube-proxy needs")

// forwardDenied returns the 403 for a request the wrapper must not forward,
// or nil when it may go upstream.
func forwardDenied(req *http.Request, info *request.RequestInfo) error {
	for name := range req.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(name), "Impersonate-") {
			return apierrors.NewForbidden(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Name,
				errors.New("impersonation through the application-grid-wrapper is not allowed"))
		}
	}
	if !info.IsResourceRequest {
		if req.Method == http.MethodGet && isDiscoveryPath(info.Path) {
			return nil
		}
		return apierrors.NewForbidden(schema.GroupResource{}, "", errNotForwarded)
	}
	gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
	if info.Subresource == "" && forwardable[gr].Has(info.Verb) {
		return nil
	}
	return apierrors.NewForbidden(gr, info.Name, errNotForwarded)
}

// isDiscoveryPath: the version and API discovery documents, which client-go
// may read.
func isDiscoveryPath(path string) bool {
	p := strings.Trim(path, "/")
	switch {
	case p == "version" || p == "api" || p == "apis":
		return true
	case strings.HasPrefix(p, "api/"):
		return strings.Count(p, "/") == 1 // /api/v1
	case strings.HasPrefix(p, "apis/"):
		return strings.Count(p, "/") <= 2 // /apis/GROUP, /apis/GROUP/VERSION
	}
	return false
}

// stripIdentity removes every header that could carry a client's identity.
func stripIdentity(h http.Header) {
	for _, name := range identityHeaders {
		h.Del(name)
	}
	for name := range h {
		for _, prefix := range identityHeaderPrefixes {
			if strings.HasPrefix(http.CanonicalHeaderKey(name), prefix) {
				h.Del(name)
			}
		}
	}
}
