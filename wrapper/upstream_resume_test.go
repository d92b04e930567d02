package wrapper

import (
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

func TestUnansweredWatchReadsAsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"no route to host while dialling", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}},
		{"TLS handshake timeout", errors.New("net/http: TLS handshake timeout")},
		{"reset before an answer", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, tt := range []struct {
				url         string
				wantRefused bool
			}{
				{"https://127.0.0.1:1/api/v1/services?watch=1&resourceVersion=5", true},
				{"https://127.0.0.1:1/api/v1/services?watch=true", true},
				// A list is retried by client-go whatever the error: left as it is.
				{"https://127.0.0.1:1/api/v1/services?resourceVersion=5", errors.Is(tc.err, syscall.ECONNREFUSED)},
			} {
				req, _ := http.NewRequest(http.MethodGet, tt.url, nil)
				_, err := unansweredWatchAsRefused{failingTransport{tc.err}}.RoundTrip(req)
				if got := utilnet.IsConnectionRefused(err); got != tt.wantRefused {
					t.Errorf("%s: IsConnectionRefused(%v) = %v, want %v", tt.url, err, got, tt.wantRefused)
				}
				if err.Error() != tc.err.Error() {
					t.Errorf("%s: error text %q, want the error's own %q", tt.url, err, tc.err)
				}
				if !errors.Is(err, tc.err) {
					t.Errorf("%s: %v does not wrap %v", tt.url, err, tc.err)
				}
			}
		})
	}
}
