// Package securemetrics serves a component's /metrics over TLS to callers the
// apiserver vouches for: a bearer token is checked with a TokenReview and the
// caller's right to "get" the non-resource URL /metrics with a
// SubjectAccessReview, both through k8s.io/apiserver's delegating
// authenticator and authorizer (the ones its DelegatingAuthenticationOptions
// and DelegatingAuthorizationOptions build for kube-controller-manager's
// secure port), cached as there. Prometheus in the cluster scrapes it with the
// token of ServiceAccount servicegroup-metrics-reader (may read /metrics and
// nothing else); nobody else reads the metrics.
package securemetrics

import (
	"context"
	"crypto/tls"
	"flag"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/servicegroup/servicegroup/internal/flagcheck"
)

// Options configure the secure metrics endpoint.
type Options struct {
	// BindAddress is host:port to serve on; "" or "0" turns it off.
	BindAddress string
	// CertFile and KeyFile are the serving certificate, reread when they
	// change (cert-manager rotation); empty: a self-signed certificate made
	// in memory at start (scrapers then skip verification).
	CertFile, KeyFile string
	// IssuedCertificate, when set and CertFile is not, is asked at each
	// handshake for a certificate issued elsewhere (the wrapper's, through
	// the CertificateSigningRequest API); while it returns nil the
	// self-signed one is served, which a verifying scraper refuses.
	IssuedCertificate func() *tls.Certificate
	// Kubeconfig reaches the apiserver that reviews tokens and access; empty:
	// the component's own apiserver configuration.
	Kubeconfig string

	// Cache times, kube-controller-manager's defaults.
	TokenCacheTTL, AllowCacheTTL, DenyCacheTTL time.Duration

	// ReusePort binds with SO_REUSEPORT: a host-network DaemonSet's new pod
	// binds the port beside the old one during a surge update.
	ReusePort bool

	// MaxConnections caps the connections open at once (more wait to be
	// accepted; 0: no cap); IdleTimeout closes a connection with no
	// request in flight for that long.
	MaxConnections int
	IdleTimeout    time.Duration

	// Listen, when set, binds the port in Serve rather than in New, through
	// listen (one attempt): a component that must not exit while another
	// process holds its port (the wrapper on a node) waits there instead.
	Listen func(ctx context.Context, listen func() (net.Listener, error)) (net.Listener, error)
}

// DefaultOptions: off, with kube-controller-manager's cache times.
func DefaultOptions() Options {
	return Options{TokenCacheTTL: 10 * time.Second, AllowCacheTTL: 10 * time.Second, DenyCacheTTL: 10 * time.Second, IdleTimeout: 90 * time.Second}
}

// Enabled reports whether a bind address is set.
func (o *Options) Enabled() bool { return o.BindAddress != "" && o.BindAddress != "0" }

// AddFlags registers the --secure-metrics-* flags on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.BindAddress, "secure-metrics-bind-address", o.BindAddress, "host:port serving /metrics over TLS to callers whose token the apiserver accepts (TokenReview) and who may get the non-resource URL /metrics (SubjectAccessReview); \"\" or \"0\" turns it off")
	fs.StringVar(&o.CertFile, "secure-metrics-tls-cert-file", o.CertFile, "serving certificate (PEM) of --secure-metrics-bind-address, reread when it changes; empty: self-signed, made in memory at start")
	fs.StringVar(&o.KeyFile, "secure-metrics-tls-private-key-file", o.KeyFile, "private key (PEM) of --secure-metrics-tls-cert-file")
	fs.StringVar(&o.Kubeconfig, "secure-metrics-kubeconfig", o.Kubeconfig, "kubeconfig of the apiserver that reviews scrapers' tokens and access; empty: the component's own apiserver configuration")
}

// Validate checks the flags' values without reading any file or binding
// anything, so a command can report them before it starts.
func (o *Options) Validate() field.ErrorList {
	var errs field.ErrorList
	if err := flagcheck.BindAddress(field.NewPath("--secure-metrics-bind-address"), o.BindAddress); err != nil {
		errs = append(errs, err)
	}
	const together = "--secure-metrics-tls-cert-file and --secure-metrics-tls-private-key-file go together"
	switch {
	case o.CertFile != "" && o.KeyFile == "":
		errs = append(errs, field.Required(field.NewPath("--secure-metrics-tls-private-key-file"), together))
	case o.CertFile == "" && o.KeyFile != "":
		errs = append(errs, field.Required(field.NewPath("--secure-metrics-tls-cert-file"), together))
	}
	return errs
}
