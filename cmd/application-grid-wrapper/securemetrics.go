package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/securemetrics"
	"github.com/servicegroup/servicegroup/wrapper"
)

// serveSecureMetrics serves the wrapper's metrics to scrapers the upstream
// apiserver vouches for, beside the loopback-only probe address; a serving
// error ends up on errCh like the other servers'.
func serveSecureMetrics(ctx context.Context, o securemetrics.Options, upstream *rest.Config, errCh chan<- error) error {
	s, err := securemetrics.New(o, upstream, promhttp.HandlerFor(wrapper.Registry, promhttp.HandlerOpts{}))
	if err != nil {
		return err
	}
	go func() { errCh <- s.Serve(ctx) }()
	return nil
}
