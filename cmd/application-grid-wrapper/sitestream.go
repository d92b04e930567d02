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
	label, namespace, bind, advertise, tokenFile, users *string
	maxConns                                            *int
}

func addSiteStreamFlags(fs *flag.FlagSet) *siteStreamFlags {
	return &siteStreamFlags{
		label:     fs.String("site-label", "", "node label whose value names this node's site: the wrappers of a site elect one that alone lists and watches Services and EndpointSlices from the apiserver and serves them to the others on --peer-bind-address (off when empty, or for a node without the label)"),
		namespace: fs.String("site-lease-namespace", "kube-system", "namespace of the sites' Leases"),
		bind:      fs.String("peer-bind-address", "", "address the site's other wrappers reach this one at (TLS, token-authenticated); required with --site-label"),
		advertise: fs.String("peer-advertise-address", "", "host:port peers dial, published in the site's Lease (default --peer-bind-address; set it when that is a wildcard address)"),
		tokenFile: fs.String("peer-token-file", "", "ServiceAccount token with audience "+sitestream.PeerAudience+" (a projected volume) this wrapper presents to its site's leader; re-read as the kubelet rotates it"),
		users:     fs.String("peer-allowed-users", "", "comma-separated users (as the apiserver's TokenReview names them) whose tokens a leader accepts (default: the user this wrapper runs as)"),
		maxConns:  fs.Int("peer-max-connections", defaultPeerMaxConnections, "connections open at once on the peer port; more wait to be accepted (each has "+peerHandshakeTimeout.String()+" to finish its TLS handshake and send its request)"),
	}
}

// options returns nil when the site stream is off.
func (f *siteStreamFlags) options() (*sitestream.Options, error) {
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
	return &sitestream.Options{
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
