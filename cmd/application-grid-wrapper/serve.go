package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/version"
	"github.com/servicegroup/servicegroup/wrapper"
)

// Run serves until ctx ends. It reads (the kubeconfig, the certificates)
// before it writes (--cert-dir, the state directory).
func (o *options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cfg, err := o.upstreamConfig()
	if err != nil {
		return err
	}
	tlsCfg, err := o.tlsConfig(logger)
	if err != nil {
		return err
	}
	wopts := o.wrapperOptions()
	wopts.Upstream = cfg
	srv, err := wrapper.New(wopts)
	if err != nil {
		return err
	}
	// ConnContext: the uid owning each client's socket, for the per-uid
	// limits.
	httpSrv := &http.Server{Handler: srv.Handler(), TLSConfig: tlsCfg, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: o.idleConns,
		BaseContext: func(net.Listener) context.Context { return ctx }, ConnContext: srv.ConnContext}

	errCh := make(chan error, 4)
	if o.secureMetrics.Enabled() {
		if err := serveSecureMetrics(ctx, srv, o.secureMetrics, o.maxConns, o.idleConns, cfg, o.kubeProxyMetrics, o.secureMetricsCSRSigner, o.nodeName, errCh); err != nil {
			return err
		}
	}
	go func() { errCh <- srv.Run(ctx) }()
	if peerSrv := servePeers(ctx, srv, o.site, errCh); peerSrv != nil {
		defer peerSrv.Close()
	}
	// Both ports are bound as soon as they are free (another process may
	// hold one: Listen waits, logs and shows it in /readyz).
	go func() {
		ln, err := srv.Listen(ctx, o.bindAddress, nil)
		if err != nil {
			errCh <- err
			return
		}
		// Connections past the cap wait in the kernel's accept queue, costing
		// the wrapper nothing; a connection that sends no request (headers
		// within ReadHeaderTimeout) or stays idle past IdleTimeout is closed.
		// Of those, a uid other than root's gets --max-connections-per-uid
		// (more are closed at once), and root can always connect.
		ln = wrapper.IdentifyClients(netutil.LimitListener(ln, o.maxConns), o.maxConns, o.uidConns)
		logger.Info("Serving", "address", ln.Addr().String(), "tls", httpSrv.TLSConfig != nil, "node", o.nodeName, "upstream", cfg.Host, "version", version.Version)
		if httpSrv.TLSConfig != nil {
			// ServeTLS (not a tls.Listener) also sets up HTTP/2, which client-go prefers.
			errCh <- httpSrv.ServeTLS(ln, "", "")
			return
		}
		errCh <- httpSrv.Serve(ln)
	}()
	if o.metricsAddr != "" {
		// The same bounds as the API port's: a local process holding
		// connections open costs the wrapper no more than there.
		metricsSrv := &http.Server{Handler: srv.OpsHandler(), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: o.idleConns}
		go func() {
			mln, err := srv.Listen(ctx, o.metricsAddr, nil)
			if err != nil {
				errCh <- err
				return
			}
			errCh <- metricsSrv.Serve(netutil.LimitListener(mln, o.maxConns))
		}()
		defer metricsSrv.Close()
	}

	select {
	case <-ctx.Done():
	case err = <-errCh:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = httpSrv.Shutdown(shutdown)
	if errors.Is(err, http.ErrServerClosed) || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		err = nil
	}
	return err
}

// upstreamConfig is the (lite-)apiserver's: --kubeconfig, or in-cluster.
func (o *options) upstreamConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("upstream config: %w", err)
	}
	cfg.UserAgent = "application-grid-wrapper/" + version.Version
	return cfg, nil
}

// tlsConfig is the serving TLS configuration (nil: plain HTTP): the
// certificate and key from their files, or --cert-dir's, made there (with
// the kubeconfigs that pin it) at the first start; clients verified against
// --client-ca-file, and their names against --client-allowed-names.
func (o *options) tlsConfig(logger klog.Logger) (*tls.Config, error) {
	if o.plainHTTP {
		return nil, nil
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.clientCA != "" {
		pem, err := os.ReadFile(o.clientCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", o.clientCA)
		}
		tlsCfg.ClientCAs, tlsCfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
		if len(o.allowedNames) > 0 {
			tlsCfg.VerifyConnection = requireClientName(o.allowedNames)
		}
	}
	certFile, keyFile := o.certFile, o.keyFile
	if o.certDir != "" {
		var err error
		if certFile, keyFile, err = o.ensureCertDir(logger); err != nil {
			return nil, err
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	tlsCfg.Certificates = []tls.Certificate{cert}
	return tlsCfg, nil
}

// ensureCertDir keeps --cert-dir's self-signed certificate and writes the
// kubeconfigs of kube-proxy and of the node's CoreDNS (the DNS view), which
// pin it.
func (o *options) ensureCertDir(logger klog.Logger) (certFile, keyFile string, err error) {
	host, _, _ := net.SplitHostPort(o.bindAddress)
	if certFile, keyFile, err = wrapper.EnsureServingCert(logger, o.certDir, host); err != nil {
		return "", "", fmt.Errorf("--cert-dir: %w", err)
	}
	if err := wrapper.WriteClientKubeconfig(filepath.Join(o.certDir, wrapper.ClientKubeconfigFile), "https://"+o.bindAddress, certFile); err != nil {
		return "", "", fmt.Errorf("--cert-dir: %w", err)
	}
	if err := wrapper.WriteClientKubeconfig(filepath.Join(o.certDir, wrapper.DNSKubeconfigFile), "https://"+o.bindAddress+wrapper.DNSPathPrefix, certFile); err != nil {
		return "", "", fmt.Errorf("--cert-dir: %w", err)
	}
	return certFile, keyFile, nil
}

// requireClientName accepts a verified client certificate only when its
// Common Name is one of names: a CA that signs certificates for other
// purposes (a cluster CA) must not admit all of them, as the apiserver's
// --requestheader-allowed-names does for front proxies.
func requireClientName(names []string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("no client certificate")
		}
		cn := cs.PeerCertificates[0].Subject.CommonName
		if !slices.Contains(names, cn) {
			return fmt.Errorf("client certificate %q is not one of --client-allowed-names", cn)
		}
		return nil
	}
}
