package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper"
)

// Peer port limits. Peers are few (a site's nodes: each follower keeps one
// HTTP/2 connection, plus a short one for a probe or a question now and
// then) and on the LAN, where anyone can connect before authenticating:
// connections beyond the limit wait to be accepted, and one that has not
// finished its TLS handshake and sent its request headers within
// peerHandshakeTimeout is closed, so a LAN client holding connections open
// delays peers by that much at most, and cannot exhaust the wrapper.
const (
	defaultPeerMaxConnections = 64
	peerHandshakeTimeout      = 5 * time.Second
)

// servePeers serves the peer port until ctx ends.
func servePeers(ctx context.Context, srv *wrapper.Server, site siteStreamFlags, errCh chan<- error) *http.Server {
	h := srv.PeerHandler()
	if h == nil {
		return nil
	}
	peerSrv := newPeerServer(ctx, h, srv.PeerTLSConfig(), peerHandshakeTimeout)
	go func() {
		ln, err := srv.Listen(ctx, site.bind, nil)
		if err != nil {
			errCh <- err
			return
		}
		klog.FromContext(ctx).Info("Serving the site's other wrappers", "address", ln.Addr().String(), "maxConnections", site.maxConns, "maxConnectionsPerHost", site.maxConnsPerHost)
		// The per-address cap inside the overall one: a connection over its
		// address's cap is closed without taking a slot.
		errCh <- peerSrv.ServeTLS(netutil.LimitListener(newPerHostListener(ln, site.maxConnsPerHost), site.maxConns), "", "")
	}()
	return peerSrv
}

// newPeerServer serves the peer port: the TLS handshake and the request
// headers within handshake (net/http bounds the handshake by the shortest
// of its timeouts), no bound on a response (watches last; the wrapper's
// watch write timeout cuts a follower that stops reading).
func newPeerServer(ctx context.Context, h http.Handler, tlsCfg *tls.Config, handshake time.Duration) *http.Server {
	return &http.Server{Handler: h, TLSConfig: tlsCfg, ReadHeaderTimeout: handshake,
		IdleTimeout: defaultIdleTimeout, BaseContext: func(net.Listener) context.Context { return ctx }}
}
