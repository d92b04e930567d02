package wrapper

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

func TestUnreachableUpstreamReadsAsRefused(t *testing.T) {
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}
	for _, tc := range []struct {
		name        string
		err         error
		wantRefused bool
	}{
		{"no route to host while dialling", unreachable, true},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		// A connection lost mid-stream is not a dial error: left as it is.
		{"read on an open connection", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1:1/api/v1/services?watch=1", nil)
			_, err := unreachableAsRefused{failingTransport{tc.err}}.RoundTrip(req)
			if got := utilnet.IsConnectionRefused(err); got != tc.wantRefused {
				t.Errorf("IsConnectionRefused(%v) = %v, want %v", err, got, tc.wantRefused)
			}
			if err.Error() != tc.err.Error() {
				t.Errorf("error text %q, want the dial error's own %q", err, tc.err)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("%v does not wrap %v", err, tc.err)
			}
		})
	}
}
