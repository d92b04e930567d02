package wrapper

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// servedResource is a resource descriptor with its store.
type servedResource struct {
	*watchcache.Resource
	store *watchcache.Store
}

// route returns the served resource a request is for, or nil when it must be
// proxied upstream. Nodes are served only for this node.
func (s *Server) route(req *http.Request, info *request.RequestInfo) *servedResource {
	if !info.IsResourceRequest || info.Subresource != "" {
		return nil
	}
	switch info.Verb {
	case "get", "list", "watch":
	default:
		return nil
	}
	r := s.resources[schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}]
	if r == nil {
		return nil
	}
	if r.OwnNodeOnly {
		if info.Name != "" {
			if info.Name != s.opts.NodeName {
				return nil
			}
		} else {
			sel, err := fields.ParseSelector(req.URL.Query().Get("fieldSelector"))
			if err != nil {
				return nil
			}
			if name, ok := sel.RequiresExactMatch("metadata.name"); !ok || name != s.opts.NodeName {
				return nil
			}
		}
	}
	return r
}

// serveResource answers get, list and watch of a served resource with the
// semantics of kube-apiserver's watch cache.
func (s *Server) serveResource(w http.ResponseWriter, req *http.Request, info *request.RequestInfo, r *servedResource) {
	if !s.ready.Load() {
		w.Header().Set("Retry-After", "1")
		s.writeError(w, req, r, apierrors.NewTooManyRequests("the wrapper's caches are not synced yet", 1))
		return
	}
	if info.Verb == "get" {
		if !s.fetched(w, req, r, nil) {
			return
		}
		obj, ok := r.store.Get(r.Key(info.Namespace, info.Name))
		if !ok {
			s.writeError(w, req, r, apierrors.NewNotFound(schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Name}, info.Name))
			return
		}
		responsewriters.WriteObjectNegotiated(s.codecs, negotiation.DefaultEndpointRestrictions, r.GroupVersion, w, req, http.StatusOK, watchcache.ShallowCopy(obj), false)
		return
	}

	var opts metainternalversion.ListOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
		s.writeError(w, req, r, apierrors.NewBadRequest(err.Error()))
		return
	}
	if info.Verb == "watch" {
		opts.Watch = true
	}
	// The apiserver's own checks and answer (422 Invalid ListOptions).
	if errs := metainternalversionvalidation.ValidateListOptions(&opts, true); len(errs) > 0 {
		s.writeError(w, req, r, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs))
		return
	}
	pred, err := s.predicate(info, r, &opts)
	if err != nil {
		s.writeError(w, req, r, err)
		return
	}
	if !s.fetched(w, req, r, opts.LabelSelector) {
		return
	}
	if opts.Watch {
		s.serveWatch(w, req, r, &opts, pred)
		return
	}
	s.serveList(w, req, r, &opts, pred)
}

// onDemandWait bounds how long a request waits for what it asks to be
// fetched from upstream before it is answered 429.
const onDemandWait = 10 * time.Second

// fetched makes sure what a request selecting by sel (nil: a get) may see
// is fetched from upstream: v1 Endpoints, and for Services and
// EndpointSlices what kube-proxy's selector leaves out. The request holds
// the on-demand informers while it lasts and waits (onDemandWait at most,
// then 429) until their objects are served. A snapshot's objects are served
// as they are while upstream is away.
func (s *Server) fetched(w http.ResponseWriter, req *http.Request, r *servedResource, sel labels.Selector) bool {
	var d *demand
	switch {
	case r.Name == watchcache.ResourceEndpoints:
		d = &s.endpoints.demand
	case (r.Name == watchcache.ResourceServices || r.Name == watchcache.ResourceEndpointSlices) && (sel == nil || !watchcache.WithinKubeProxySelection(sel)):
		d = s.unproxied
	default:
		return true
	}
	ready, release := d.use()
	context.AfterFunc(req.Context(), release)
	if ready || s.seededFrom.Load() != nil || d.await(req.Context(), onDemandWait) {
		return true
	}
	w.Header().Set("Retry-After", "1")
	s.writeError(w, req, r, apierrors.NewTooManyRequests("fetching "+d.what+" from upstream", 1))
	return false
}

// predicate builds the selection of a request: namespace, name (watch of one
// object), label and field selectors. Unsupported field labels are a 400, as
// from the apiserver.
func (s *Server) predicate(info *request.RequestInfo, r *servedResource, opts *metainternalversion.ListOptions) (watchcache.Predicate, error) {
	lsel, fsel := opts.LabelSelector, opts.FieldSelector
	if lsel == nil {
		lsel = labels.Everything()
	}
	if fsel == nil {
		fsel = fields.Everything()
	}
	for _, req := range fsel.Requirements() {
		if !r.SupportsField(req.Field) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	ns, name := info.Namespace, info.Name
	if !r.Namespaced {
		ns = ""
	}
	if ns == "" && name == "" && lsel.Empty() && fsel.Empty() {
		return nil, nil
	}
	return func(o watchcache.Object) bool {
		if ns != "" && o.GetNamespace() != ns {
			return false
		}
		if name != "" && o.GetName() != name {
			return false
		}
		// kube-proxy selects by label only: no field set is built for it.
		return lsel.Matches(labels.Set(o.GetLabels())) && (fsel.Empty() || fsel.Matches(r.Fields(o)))
	}, nil
}

func parseRV(rv string) (uint64, error) {
	if rv == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
	}
	return v, nil
}

// tooLargeError is what the apiserver answers for a version it has not seen:
// clients relist from scratch.
func tooLargeError(rv, current uint64) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusGatewayTimeout,
		Reason:  metav1.StatusReasonTimeout,
		Message: fmt.Sprintf("Too large resource version: %d, current: %d", rv, current),
		Details: &metav1.StatusDetails{
			Causes:            []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}},
			RetryAfterSeconds: 1,
		},
	}}
}

// serveList serves the whole selection (limit and continue are ignored, as by
// the apiserver's watch cache) at the store's current version.
func (s *Server) serveList(w http.ResponseWriter, req *http.Request, r *servedResource, opts *metainternalversion.ListOptions, pred watchcache.Predicate) {
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		s.writeError(w, req, r, err)
		return
	}
	items, cur := r.store.List(pred)
	switch {
	case rv > cur:
		s.writeError(w, req, r, tooLargeError(rv, cur))
		return
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && rv != cur:
		s.writeError(w, req, r, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, cur)))
		return
	}
	list := r.NewList(items, strconv.FormatUint(cur, 10))
	responsewriters.WriteObjectNegotiated(s.codecs, negotiation.DefaultEndpointRestrictions, r.GroupVersion, w, req, http.StatusOK, list, false)
}

func (s *Server) writeError(w http.ResponseWriter, req *http.Request, r *servedResource, err error) {
	gv := metav1.SchemeGroupVersion
	if r != nil {
		gv = r.GroupVersion
	}
	responsewriters.ErrorNegotiated(err, s.codecs, gv, w, req)
}
