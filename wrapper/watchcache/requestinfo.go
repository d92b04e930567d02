package watchcache

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// requestInfo parses requests as kube-apiserver does.
var requestInfo = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// IsWatch reports whether r asks for a watch by the watch parameter, as
// client-go sends one.
func IsWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// WithRequestInfo gives next the request's RequestInfo (what a View routes
// by) in its context; a request that cannot be parsed is answered 400.
func WithRequestInfo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, err := requestInfo.NewRequestInfo(req)
		if err != nil {
			WriteError(w, req, apierrors.NewBadRequest(err.Error()))
			return
		}
		next.ServeHTTP(w, req.WithContext(request.WithRequestInfo(req.Context(), info)))
	})
}
