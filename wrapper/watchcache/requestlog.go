package watchcache

import (
	"net/http"
	"strconv"
	"time"

	"k8s.io/klog/v2"
)

// WithRequestLog logs one line per request (verbosity 3) and counts it in
// requests_total by the verb and resource LabelRequest gave it ("other"
// when none did).
func WithRequestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, verb: "other", resource: "other"}
		next.ServeHTTP(rec, req)
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		requestsTotal.WithLabelValues(rec.verb, rec.resource, strconv.Itoa(rec.code)).Inc()
		klog.FromContext(req.Context()).V(3).Info("HTTP", "verb", req.Method, "uri", req.RequestURI,
			"status", rec.code, "latency", time.Since(start), "remote", req.RemoteAddr, "userAgent", req.UserAgent())
	})
}

// LabelRequest names the verb and resource a request is counted under.
func LabelRequest(w http.ResponseWriter, verb, resource string) {
	if r, ok := w.(*statusRecorder); ok {
		r.verb, r.resource = verb, resource
	}
}

// statusRecorder remembers the status code for the request log and metrics;
// Unwrap keeps http.ResponseController (flush, deadlines) working.
type statusRecorder struct {
	http.ResponseWriter
	code           int
	verb, resource string
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// FlushError keeps a failed flush an error: http.ResponseController takes a
// Flusher's Flush before Unwrap, and a watch cut off at its write deadline
// while flushing would look written.
func (r *statusRecorder) FlushError() error {
	return http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *statusRecorder) Flush() { _ = r.FlushError() }

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
