package wrapper

import (
	"context"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// kubeProxyResources are what kube-proxy's view serves, in the order of
// the snapshot's sections.
var kubeProxyResources = []*watchcache.Resource{watchcache.Services, watchcache.Endpoints, watchcache.EndpointSlices, watchcache.Nodes}

// kubeProxyView is what kube-proxy reads: kubeProxyResources, filtered
// for this node, and this node's own Node, and ServiceCIDRs; the few other
// requests kube-proxy makes are forwarded upstream, everything else
// refused.
type kubeProxyView struct {
	api   *watchcache.View
	ready *watchcache.Ready
	// endpoints and unproxied fetch, while clients ask, v1 Endpoints and
	// what kube-proxy's selector leaves out.
	endpoints, unproxied *demand
	cidrs                *serviceCIDRs
	proxy                http.Handler
}

// serve serves served (kubeProxyResources, then ServiceCIDRs), Nodes for
// node only.
func (k *kubeProxyView) serve(served []*watchcache.Served, node string, writeTimeout time.Duration) {
	k.api = watchcache.NewView(watchcache.ViewConfig{
		Served:            served,
		Node:              node,
		Ready:             k.ready,
		Admit:             k.admit,
		Unrouted:          http.HandlerFunc(k.forwardOrRefuse),
		Labelled:          true,
		WatchWriteTimeout: writeTimeout,
	})
}

// admit makes sure what a request may see is fetched from upstream: v1
// Endpoints, ServiceCIDRs, and for Services and EndpointSlices what
// kube-proxy's selector leaves out (a get, sel nil, may name any).
func (k *kubeProxyView) admit(w http.ResponseWriter, req *http.Request, _ string, r *watchcache.Served, sel labels.Selector) bool {
	switch {
	case r.Resource == watchcache.ServiceCIDRs:
		return k.cidrs.admit(k.ready, k.forwardOrRefuse, w, req, r)
	case r.Resource == watchcache.Endpoints:
		return holdDemand(k.ready, w, req, r, k.endpoints)
	case (r.Resource == watchcache.Services || r.Resource == watchcache.EndpointSlices) && !watchcache.WithinKubeProxySelection(sel):
		return holdDemand(k.ready, w, req, r, k.unproxied)
	}
	return true
}

// onDemandWait bounds how long a request waits for what it asks to be
// fetched from upstream before it is answered 429.
const onDemandWait = 10 * time.Second

// holdDemand holds d's informers for the request's life and waits
// (onDemandWait at most, then 429) until their objects are served. A
// snapshot's objects are served as they are while upstream is away: the
// fetch then confirms them when upstream returns.
func holdDemand(ready *watchcache.Ready, w http.ResponseWriter, req *http.Request, r *watchcache.Served, d *demand) bool {
	fetched, release := d.use()
	context.AfterFunc(req.Context(), release)
	if fetched || ready.State() == watchcache.Snapshot || d.await(req.Context(), onDemandWait) {
		return true
	}
	w.Header().Set("Retry-After", "1")
	r.WriteError(w, req, apierrors.NewTooManyRequests("fetching "+d.what+" from upstream", 1))
	return false
}

// forwardOrRefuse forwards upstream the few requests kube-proxy makes
// besides what the view serves, and refuses the rest.
func (k *kubeProxyView) forwardOrRefuse(w http.ResponseWriter, req *http.Request) {
	info, _ := request.RequestInfoFrom(req.Context())
	if err := forwardDenied(req, info); err != nil {
		watchcache.LabelRequest(w, "denied", "denied")
		klog.FromContext(req.Context()).V(2).Info("Refused", "method", req.Method, "uri", req.RequestURI, "remote", req.RemoteAddr)
		watchcache.WriteError(w, req, err)
		return
	}
	watchcache.LabelRequest(w, "proxy", "proxy")
	k.proxy.ServeHTTP(w, req)
}
