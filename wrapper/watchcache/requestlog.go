package watchcache

import (
	"net/http"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/internal/statusrecorder"
)

// WithRequestLog logs one line per request (verbosity 3) and counts it in
// requests_total by the verb and resource LabelRequest gave it ("other"
// when none did).
func WithRequestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		rec := &statusRecorder{Recorder: statusrecorder.Recorder{ResponseWriter: w}, verb: "other", resource: "other"}
		next.ServeHTTP(rec, req)
		if rec.Code == 0 {
			rec.Code = http.StatusOK
		}
		requestsTotal.WithLabelValues(rec.verb, rec.resource, strconv.Itoa(rec.Code)).Inc()
		klog.FromContext(req.Context()).V(3).Info("HTTP", "verb", req.Method, "uri", req.RequestURI,
			"status", rec.Code, "latency", time.Since(start), "remote", req.RemoteAddr, "userAgent", req.UserAgent())
	})
}

// LabelRequest names the verb and resource a request is counted under.
func LabelRequest(w http.ResponseWriter, verb, resource string) {
	if r, ok := w.(*statusRecorder); ok {
		r.verb, r.resource = verb, resource
	}
}

// statusRecorder adds the verb and resource a request is counted under to
// the status the request log reports.
type statusRecorder struct {
	statusrecorder.Recorder
	verb, resource string
}
