package watchcache

import (
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/client-go/kubernetes/scheme"
)

// What a view answers besides objects: errors as Status objects,
// encoded as the client asked, and the resourceVersion a request names.

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
