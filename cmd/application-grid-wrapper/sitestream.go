package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper"
)

// siteStreamFlags turn on one cloud stream per site (wrapper.SiteStreamOptions).
type siteStreamFlags struct {
	label, namespace, bind, advertise, tokenFile, users *string
	maxConns                                            *int
}

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

func addSiteStreamFlags(fs *flag.FlagSet) *siteStreamFlags {
	return &siteStreamFlags{
		label:     fs.String("site-label", "", "node label whose value names this node's site: the wrappers of a site elect one that alone lists and watches Services and EndpointSlices from the apiserver and serves them to the others on --peer-bind-address (off when empty, or for a node without the label)"),
		namespace: fs.String("site-lease-namespace", "kube-system", "namespace of the sites' Leases"),
		bind:      fs.String("peer-bind-address", "", "address the site's other wrappers reach this one at (TLS, token-authenticated); required with --site-label"),
		advertise: fs.String("peer-advertise-address", "", "host:port peers dial, published in the site's Lease (default --peer-bind-address; set it when that is a wildcard address)"),
		tokenFile: fs.String("peer-token-file", "", "ServiceAccount token with audience "+wrapper.PeerAudience+" (a projected volume) this wrapper presents to its site's leader; re-read as the kubelet rotates it"),
		users:     fs.String("peer-allowed-users", "", "comma-separated users (as the apiserver's TokenReview names them) whose tokens a leader accepts (default: the user this wrapper runs as)"),
		maxConns:  fs.Int("peer-max-connections", defaultPeerMaxConnections, "connections open at once on the peer port; more wait to be accepted (each has "+peerHandshakeTimeout.String()+" to finish its TLS handshake and send its request)"),
	}
}

// options returns nil when the site stream is off.
func (f *siteStreamFlags) options() (*wrapper.SiteStreamOptions, error) {
	if *f.label == "" {
		return nil, nil
	}
	if *f.bind == "" || *f.tokenFile == "" {
		return nil, errors.New("--site-label needs --peer-bind-address and --peer-token-file")
	}
	if *f.maxConns < 1 {
		return nil, errors.New("--peer-max-connections must be at least 1")
	}
	adv := *f.advertise
	if adv == "" {
		adv = *f.bind
	}
	host, _, err := net.SplitHostPort(adv)
	if err != nil {
		return nil, fmt.Errorf("--peer-advertise-address: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return nil, fmt.Errorf("--peer-advertise-address %q must be the IP address peers dial", adv)
	}
	return &wrapper.SiteStreamOptions{
		GroupLabel: *f.label, Namespace: *f.namespace, AdvertiseAddress: adv,
		Token: tokenFromFile(*f.tokenFile), AllowedUsers: splitNames(*f.users),
	}, nil
}

// tokenFromFile re-reads path at most once a minute (the kubelet rotates
// projected tokens well before they expire).
func tokenFromFile(path string) func() (string, error) {
	var mu sync.Mutex
	var tok string
	var read time.Time
	return func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if tok != "" && time.Since(read) < time.Minute {
			return tok, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			tok, read = t, time.Now()
			return tok, nil
		}
		return "", fmt.Errorf("%s is empty", path)
	}
}

// servePeers serves the peer port until ctx ends.
func servePeers(ctx context.Context, srv *wrapper.Server, site *siteStreamFlags, errCh chan<- error) *http.Server {
	h := srv.PeerHandler()
	if h == nil {
		return nil
	}
	peerSrv := newPeerServer(ctx, h, srv.PeerTLSConfig(), peerHandshakeTimeout)
	go func() {
		ln, err := srv.Listen(ctx, *site.bind, nil)
		if err != nil {
			errCh <- err
			return
		}
		klog.FromContext(ctx).Info("Serving the site's other wrappers", "address", ln.Addr().String(), "maxConnections", *site.maxConns)
		errCh <- peerSrv.ServeTLS(netutil.LimitListener(ln, *site.maxConns), "", "")
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
