package watchcache

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A failed flush reaches http.ResponseController through the request log:
// the watch server tells a watch cut off while flushing by it.
func TestRequestLogKeepsFlushErrors(t *testing.T) {
	h := WithRequestLog(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := http.NewResponseController(w).Flush(); !errors.Is(err, errFlush) {
			t.Errorf("flush through the request log: %v, want %v", err, errFlush)
		}
	}))
	h.ServeHTTP(failingFlusher{httptest.NewRecorder()}, httptest.NewRequest(http.MethodGet, "/", nil))
}

var errFlush = errors.New("flush failed")

type failingFlusher struct{ *httptest.ResponseRecorder }

func (failingFlusher) FlushError() error { return errFlush }
