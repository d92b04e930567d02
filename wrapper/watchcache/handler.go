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
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/scheme"
)

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

// TooLargeError is what the apiserver answers for a version it has not
// seen: clients relist from scratch.
func TooLargeError(rv, current uint64) error {
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

// codecs encode every answer: the client-go scheme's types, which are all
// a view serves.
var codecs = serializer.NewCodecFactory(scheme.Scheme)

func writeError(w http.ResponseWriter, req *http.Request, r *Served, err error) {
	gv := metav1.SchemeGroupVersion
	if r != nil {
		gv = r.GroupVersion
	}
	responsewriters.ErrorNegotiated(err, codecs, gv, w, req)
}

// WriteError answers err as a Status, encoded as the client asked, as the
// apiserver answers errors.
func WriteError(w http.ResponseWriter, req *http.Request, err error) { writeError(w, req, nil, err) }

// WriteError answers err about r as a Status (WriteError).
func (r *Served) WriteError(w http.ResponseWriter, req *http.Request, err error) {
	writeError(w, req, r, err)
}
