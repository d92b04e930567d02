package main

import (
	"context"
	"fmt"
	"net"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/securemetrics"
	"github.com/servicegroup/servicegroup/metricscert"
	"github.com/servicegroup/servicegroup/wrapper"
)

// KubeProxyMetricsPath serves the node's kube-proxy metrics behind the same
// checks, so kube-proxy's loopback-only metrics reach Prometheus too.
const kubeProxyMetricsPath = "/metrics/kube-proxy"

// serveSecureMetrics serves the wrapper's metrics (and, when kubeProxyURL is
// set, the node's kube-proxy's) to scrapers the upstream apiserver vouches
// for, beside the loopback-only probe address, with a certificate csrSigner
// issues for nodeName when set; a serving error ends up on errCh like the
// other servers'.
func serveSecureMetrics(ctx context.Context, srv *wrapper.Server, o securemetrics.Options, maxConns int, idleTimeout time.Duration, upstream *rest.Config, kubeProxyURL, csrSigner, nodeName string, errCh chan<- error) error {
	// A port another process holds is waited for, as the API port is
	// (Server.Listen: logged, named by /readyz), never a reason to exit.
	o.MaxConnections, o.IdleTimeout = maxConns, idleTimeout
	o.Listen = func(ctx context.Context, listen func() (net.Listener, error)) (net.Listener, error) {
		return srv.Listen(ctx, o.BindAddress, listen)
	}
	var extra []securemetrics.Route
	if kubeProxyURL != "" {
		target, err := kubeProxyMetricsTarget(kubeProxyURL)
		if err != nil {
			return err
		}
		proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL, r.Out.Host = target, target.Host
			r.Out.Header.Del("Authorization") // the scraper's token stays here
		}}
		extra = append(extra, securemetrics.Route{Path: kubeProxyMetricsPath, Handler: proxy})
	}
	if csrSigner != "" {
		kube, err := kubernetes.NewForConfig(rest.CopyConfig(upstream))
		if err != nil {
			return err
		}
		issued, err := metricscert.RequestServingCertificate(ctx, kube, csrSigner, nodeName, "system:servicegroup-wrapper-metrics:"+nodeName)
		if err != nil {
			return err
		}
		o.IssuedCertificate = issued
	}
	s, err := securemetrics.New(o, upstream, promhttp.HandlerFor(wrapper.Gatherer, promhttp.HandlerOpts{}), extra...)
	if err != nil {
		return err
	}
	go func() { errCh <- s.Serve(ctx) }()
	return nil
}

// kubeProxyMetricsTarget reads --kube-proxy-metrics-url: only a loopback
// HTTP URL.
func kubeProxyMetricsTarget(raw string) (*url.URL, error) {
	target, err := url.Parse(raw)
	if err != nil || target.Scheme != "http" || !isLoopback(target.Host) {
		return nil, fmt.Errorf("--kube-proxy-metrics-url %q: want http://LOOPBACK:PORT/PATH", raw)
	}
	return target, nil
}
