package wrapper_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/testnet"
)

// wireCounter counts what crosses a client's TCP connections, below TLS:
// records, HTTP/2 frames and headers, HTTP/1.1 chunking, as a link carries
// them, beside the decoded bodies a byteCounter or cloudLink counts.
type wireCounter struct{ count testnet.WireCount }

func newWireCounter() *wireCounter { return &wireCounter{} }

// total is both directions: everything on the link.
func (w *wireCounter) total() int64 { return w.count.Total() }

// wrap returns cfg with one transport of its own, built as client-go
// builds one (its TLS, HTTP/2 and health-check defaults) but dialing
// through the counter: every client made from the copy shares its
// connections, as clients of one config share client-go's cached transport
// (a config with a Dial of its own would get one connection per client).
func (w *wireCounter) wrap(tb testing.TB, cfg *rest.Config) *rest.Config {
	tb.Helper()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := utilnet.SetTransportDefaults(&http.Transport{
		Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: 10 * time.Second, TLSClientConfig: tlsConfig,
		MaxIdleConnsPerHost: 25, IdleConnTimeout: 90 * time.Second,
		DialContext: w.count.DialContext(dialer),
	})
	cfg = rest.CopyConfig(cfg)
	cfg.Transport, cfg.TLSClientConfig = t, rest.TLSClientConfig{}
	tb.Cleanup(t.CloseIdleConnections)
	return cfg
}
