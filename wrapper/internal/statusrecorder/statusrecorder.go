// Package statusrecorder is the response writer that remembers the status
// code a handler answered with, shared by the wrapper's request log and
// the tests that wrap its handler.
package statusrecorder

import "net/http"

// Recorder remembers the first status code written; Unwrap and FlushError
// keep http.ResponseController (flushes, write deadlines) working through
// it, failures included.
type Recorder struct {
	http.ResponseWriter
	// Code is the status written, 0 until a header or body is.
	Code int
}

func (r *Recorder) WriteHeader(code int) {
	if r.Code == 0 {
		r.Code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *Recorder) Write(b []byte) (int, error) {
	if r.Code == 0 {
		r.Code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// FlushError keeps a failed flush an error: http.ResponseController takes a
// Flusher's Flush before Unwrap, and a watch cut off at its write deadline
// while flushing would look written.
func (r *Recorder) FlushError() error {
	return http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *Recorder) Flush() { _ = r.FlushError() }

func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
