package securemetrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/sys/unix"

	"golang.org/x/net/netutil"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/sockopt"
)

// Server is a bound, not yet serving, secure metrics endpoint.
type Server struct {
	opts     Options
	listen   func() (net.Listener, error) // one attempt at binding
	listener net.Listener                 // nil until bound
	handler  http.Handler
	certs    *dynamiccertificates.DynamicCertKeyPairContent // nil: self-signed
	tls      *tls.Config
}

// Route is one more path served behind the same checks (the caller needs
// "get" on that non-resource URL).
type Route struct {
	Path    string
	Handler http.Handler
}

// New checks the options, binds the address and builds the handler chain
// around metrics (served at /metrics) and extra; own is the component's
// apiserver configuration, used unless o.Kubeconfig names another.
func New(o Options, own *rest.Config, metrics http.Handler, extra ...Route) (*Server, error) {
	if !o.Enabled() {
		return nil, errors.New("secure metrics: no bind address")
	}
	if errs := o.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	cfg, err := o.RESTConfig(own)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, err
	}
	handler, err := chain(o, client, append([]Route{{"/metrics", metrics}}, extra...))
	if err != nil {
		return nil, err
	}

	s := &Server{opts: o, handler: handler, tls: &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}}
	if o.CertFile != "" {
		if s.certs, err = dynamiccertificates.NewDynamicServingContentFromFiles("secure-metrics", o.CertFile, o.KeyFile); err != nil {
			return nil, err
		}
		s.tls.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, k := s.certs.CurrentCertKeyContent()
			pair, err := tls.X509KeyPair(c, k)
			return &pair, err
		}
	}
	var lc net.ListenConfig
	if o.ReusePort {
		lc.Control = sockopt.Int(unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}
	s.listen = func() (net.Listener, error) { return lc.Listen(context.Background(), "tcp", o.BindAddress) }
	if s.certs == nil {
		host, _, _ := net.SplitHostPort(o.BindAddress)
		if err := s.selfSign(host); err != nil {
			return nil, err
		}
		if issued := o.IssuedCertificate; issued != nil {
			// Not through Certificates, which tls serves before
			// GetCertificate to a client sending no SNI (one dialing an IP).
			selfSigned := s.tls.Certificates[0]
			s.tls.Certificates = nil
			s.tls.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				if c := issued(); c != nil {
					return c, nil
				}
				return &selfSigned, nil
			}
		}
	}
	if o.Listen == nil {
		if s.listener, err = s.listen(); err != nil {
			return nil, fmt.Errorf("--secure-metrics-bind-address: %w", err)
		}
	}
	return s, nil
}

// RESTConfig is the apiserver configuration the endpoint reviews tokens
// with: o.Kubeconfig's, else own, else the in-cluster one.
func (o *Options) RESTConfig(own *rest.Config) (*rest.Config, error) {
	if o.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--secure-metrics-kubeconfig: %w", err)
		}
		return cfg, nil
	}
	if own != nil {
		return own, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("secure metrics: no apiserver to review tokens (set --secure-metrics-kubeconfig): %w", err)
	}
	return cfg, nil
}

// chain is kube-controller-manager's secure handler chain: request info,
// authentication (TokenReview), authorization (SubjectAccessReview).
func chain(o Options, client kubernetes.Interface, routes []Route) (http.Handler, error) {
	// The apiserver's own retry backoff for its webhooks.
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      backoff,
		CacheTTL:                 o.TokenCacheTTL,
	}.New()
	if err != nil {
		return nil, err
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             o.AllowCacheTTL,
		DenyCacheTTL:              o.DenyCacheTTL,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.Path, r.Handler)
	}
	h := genericapifilters.WithAuthorization(mux, authz, scheme.Codecs)
	h = genericapifilters.WithAuthentication(h, authn, genericapifilters.Unauthorized(scheme.Codecs), nil, nil)
	h = genericapifilters.WithRequestInfo(h, &request.RequestInfoFactory{
		APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api"),
	})
	return h, nil
}

// selfSign gives the listener a certificate made in memory for host (and
// localhost); it is not kept, so each start has a new one.
func (s *Server) selfSign(host string) error {
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	}
	name := host
	if name == "" || net.ParseIP(name) != nil {
		name = "localhost"
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(name, ips, nil)
	if err != nil {
		return fmt.Errorf("secure metrics: self-signed certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	s.tls.Certificates = []tls.Certificate{pair}
	return nil
}

// Addr is the bound address (the configured one until Serve has bound it,
// with Options.Listen).
func (s *Server) Addr() string {
	if s.listener == nil {
		return s.opts.BindAddress
	}
	return s.listener.Addr().String()
}

// Serve serves until ctx ends; with Options.Listen it binds first.
func (s *Server) Serve(ctx context.Context) error {
	if s.listener == nil {
		ln, err := s.opts.Listen(ctx, s.listen)
		if err != nil {
			return fmt.Errorf("--secure-metrics-bind-address: %w", err)
		}
		s.listener = ln
	}
	if s.certs != nil {
		if err := s.certs.RunOnce(ctx); err != nil {
			return err
		}
		go s.certs.Run(ctx, 1)
	}
	srv := &http.Server{Handler: s.handler, TLSConfig: s.tls, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: s.opts.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	ln := s.listener
	if s.opts.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, s.opts.MaxConnections)
	}
	stop := context.AfterFunc(ctx, func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	})
	defer stop()
	klog.FromContext(ctx).Info("Serving metrics to authorised scrapers", "address", s.Addr(), "selfSigned", s.certs == nil)
	if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
