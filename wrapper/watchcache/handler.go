package watchcache

import (
	"fmt"
	"net/http"
	"strconv"

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
)

// ServeHTTP serves a request the view routes to one of its resources, and
// hands any other to Unrouted.
func (v *View) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	info, _ := request.RequestInfoFrom(req.Context()) // WithRequestInfo
	r := v.route(req, info)
	if r == nil {
		v.cfg.Unrouted.ServeHTTP(w, req)
		return
	}
	if v.cfg.Labelled {
		LabelRequest(w, info.Verb, v.labels[r])
	}
	v.serve(w, req, info, r)
}

// route returns the served resource a request is for, or nil: only get,
// list and watch of a resource of the view (no subresource), and of an
// OwnNodeOnly resource only the view's node, by name or by a field
// selector on its name.
func (v *View) route(req *http.Request, info *request.RequestInfo) *Served {
	if !info.IsResourceRequest || info.Subresource != "" {
		return nil
	}
	switch info.Verb {
	case "get", "list", "watch":
	default:
		return nil
	}
	r := v.resources[schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}]
	if r == nil || !r.OwnNodeOnly {
		return r
	}
	if info.Name != "" {
		if info.Name != v.cfg.Node {
			return nil
		}
		return r
	}
	sel, err := fields.ParseSelector(req.URL.Query().Get("fieldSelector"))
	if err != nil {
		return nil
	}
	if name, ok := sel.RequiresExactMatch("metadata.name"); !ok || name != v.cfg.Node {
		return nil
	}
	return r
}

// serve answers get, list and watch of one of the view's resources with
// the semantics of kube-apiserver's watch cache.
func (v *View) serve(w http.ResponseWriter, req *http.Request, info *request.RequestInfo, r *Served) {
	if v.cfg.Ready != nil && !v.cfg.Ready.Serving() {
		w.Header().Set("Retry-After", "1")
		writeError(w, req, r, apierrors.NewTooManyRequests("the wrapper's caches are not synced yet", 1))
		return
	}
	if info.Verb == "get" {
		if !v.admitted(w, req, info.Verb, r, nil) {
			return
		}
		obj, ok := r.Store.Get(r.Key(info.Namespace, info.Name))
		if !ok {
			writeError(w, req, r, apierrors.NewNotFound(r.GroupResource(), info.Name))
			return
		}
		responsewriters.WriteObjectNegotiated(codecs, negotiation.DefaultEndpointRestrictions, r.GroupVersion, w, req, http.StatusOK, ShallowCopy(obj), false)
		return
	}

	var opts metainternalversion.ListOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
		writeError(w, req, r, apierrors.NewBadRequest(err.Error()))
		return
	}
	if info.Verb == "watch" {
		opts.Watch = true
	}
	// The apiserver's own checks and answer (422 Invalid ListOptions).
	if errs := metainternalversionvalidation.ValidateListOptions(&opts, true); len(errs) > 0 {
		writeError(w, req, r, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs))
		return
	}
	pred, err := predicate(info, r, &opts)
	if err != nil {
		writeError(w, req, r, err)
		return
	}
	if !v.admitted(w, req, info.Verb, r, opts.LabelSelector) {
		return
	}
	if opts.Watch {
		v.serveWatch(w, req, r, &opts, pred)
		return
	}
	serveList(w, req, r, &opts, pred)
}

// predicate builds the selection of a request: namespace, name (watch of one
// object), label and field selectors. Unsupported field labels are a 400, as
// from the apiserver.
func predicate(info *request.RequestInfo, r *Served, opts *metainternalversion.ListOptions) (Predicate, error) {
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
	return func(o Object) bool {
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

// serveList serves the whole selection (limit and continue are ignored, as by
// the apiserver's watch cache) at the store's current version.
func serveList(w http.ResponseWriter, req *http.Request, r *Served, opts *metainternalversion.ListOptions, pred Predicate) {
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		writeError(w, req, r, err)
		return
	}
	items, cur := r.Store.List(pred)
	switch {
	case rv > cur:
		writeError(w, req, r, TooLargeError(rv, cur))
		return
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && rv != cur:
		writeError(w, req, r, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, cur)))
		return
	}
	list := r.NewList(items, strconv.FormatUint(cur, 10))
	responsewriters.WriteObjectNegotiated(codecs, negotiation.DefaultEndpointRestrictions, r.GroupVersion, w, req, http.StatusOK, list, false)
}
