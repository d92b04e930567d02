package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/servicegroup/servicegroup/wrapper/sitestream"
)

// siteStreamFlags turn on one cloud stream per site (sitestream.Options);
// peerserver.go serves the peer port they configure.
type siteStreamFlags struct {
	label, namespace, bind, advertise, tokenFile, users string
	maxConns, maxConnsPerHost                           int
}

// AddFlags registers the site stream's flags on fs.
func (f *siteStreamFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.label, "site-label", f.label, "node label whose value names this node's site: the wrappers of a site elect one that alone lists and watches Services and EndpointSlices from the apiserver and serves them to the others on --peer-bind-address (off when empty, or for a node without the label)")
	fs.StringVar(&f.namespace, "site-lease-namespace", f.namespace, "namespace of the sites' Leases")
	fs.StringVar(&f.bind, "peer-bind-address", f.bind, "address the site's other wrappers reach this one at (TLS, token-authenticated); required with --site-label")
	fs.StringVar(&f.advertise, "peer-advertise-address", f.advertise, "host:port peers dial, published in the site's Lease (default --peer-bind-address; set it when that is a wildcard address)")
	fs.StringVar(&f.tokenFile, "peer-token-file", f.tokenFile, "ServiceAccount token with audience "+sitestream.PeerAudience+" this wrapper presents to its site's leader: a projected volume's, bound to this wrapper's Pod (the leader serves only Pods on nodes of its site); re-read as the kubelet rotates it")
	fs.StringVar(&f.users, "peer-allowed-users", f.users, "comma-separated users (as the apiserver's TokenReview names them) whose tokens a leader accepts (default: the user this wrapper runs as)")
	fs.IntVar(&f.maxConns, "peer-max-connections", f.maxConns, "connections open at once on the peer port; more wait to be accepted (each has "+peerHandshakeTimeout.String()+" to finish its TLS handshake and send its request)")
	fs.IntVar(&f.maxConnsPerHost, "peer-max-connections-per-host", f.maxConnsPerHost, "connections open at once on the peer port from one address; more are closed at once, so that one LAN client cannot take the site's peers' slots")
}

// advertised is the address peers dial: --peer-advertise-address, else
// --peer-bind-address.
func (f *siteStreamFlags) advertised() string {
	if f.advertise != "" {
		return f.advertise
	}
	return f.bind
}

// validate checks the site stream's flags when it is on.
func (f *siteStreamFlags) validate() error {
	if f.label == "" {
		return nil
	}
	if f.bind == "" || f.tokenFile == "" {
		return errors.New("--site-label needs --peer-bind-address and --peer-token-file")
	}
	if f.maxConns < 1 || f.maxConnsPerHost < 1 {
		return errors.New("--peer-max-connections and --peer-max-connections-per-host must be at least 1")
	}
	adv := f.advertised()
	host, _, err := net.SplitHostPort(adv)
	if err != nil {
		return fmt.Errorf("--peer-advertise-address: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("--peer-advertise-address %q must be the IP address peers dial", adv)
	}
	return nil
}

// options returns nil when the site stream is off.
func (f *siteStreamFlags) options() *sitestream.Options {
	if f.label == "" {
		return nil
	}
	return &sitestream.Options{
		GroupLabel: f.label, Namespace: f.namespace, AdvertiseAddress: f.advertised(),
		Token: tokenFromFile(f.tokenFile), AllowedUsers: splitNames(f.users),
	}
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
