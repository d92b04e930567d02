package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/servicegroup/servicegroup/wrapper"
)

// Validate checks every flag of the serving mode, so that a bad one stops
// the command before it reads its kubeconfig or certificates, or writes its
// state directory or --cert-dir.
func (o *options) Validate() error {
	if o.nodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required: the wrapper serves one node's view")
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if n := countSet(o.certFile != "", o.certDir != "", o.plainHTTP); n != 1 {
		return errors.New("serve TLS with --cert-dir (self-signed, pinned by clients) or --tls-cert-file and --tls-private-key-file, or plain HTTP with --insecure-plain-http: exactly one")
	}
	if o.clientCA != "" && o.plainHTTP {
		return errors.New("--client-ca-file needs TLS, not --insecure-plain-http")
	}
	if len(o.allowedNames) > 0 && o.clientCA == "" {
		return errors.New("--client-allowed-names needs --client-ca-file")
	}
	if o.clientCA == "" && !isLoopback(o.bindAddress) {
		return fmt.Errorf("--bind-address %s is not a loopback address: it needs --client-ca-file (and TLS), or anyone who reaches it acts with the wrapper's credentials", o.bindAddress)
	}
	if o.certDir != "" {
		if host, _, _ := net.SplitHostPort(o.bindAddress); host == "" || net.ParseIP(host).IsUnspecified() {
			return fmt.Errorf("--cert-dir: a self-signed certificate needs the address clients use, not %q: give a concrete --bind-address", host)
		}
	}
	if err := o.site.validate(); err != nil {
		return err
	}
	if o.maxConns < 1 || o.maxInFlight < 1 || o.maxWatches < 1 {
		return errors.New("--max-connections, --max-requests-inflight and --max-watches must be at least 1")
	}
	if err := wrapper.CheckUIDBudget("--max-requests-inflight-per-uid", o.uidInFlight, "--max-requests-inflight", o.maxInFlight); err != nil {
		return err
	}
	if err := wrapper.CheckUIDBudget("--max-watches-per-uid", o.uidWatches, "--max-watches", o.maxWatches); err != nil {
		return err
	}
	if err := wrapper.CheckUIDBudget("--max-connections-per-uid", o.uidConns, "--max-connections", o.maxConns); err != nil {
		return err
	}
	if o.idleConns <= 0 {
		return errors.New("--idle-connection-timeout must be positive")
	}
	if errs := o.secureMetrics.Validate(); len(errs) > 0 {
		return errs.ToAggregate()
	}
	if o.kubeProxyMetrics != "" {
		if _, err := kubeProxyMetricsTarget(o.kubeProxyMetrics); err != nil {
			return err
		}
	}
	if o.secureMetricsCSRSigner != "" && (!o.secureMetrics.Enabled() || o.secureMetrics.CertFile != "") {
		return errors.New("--secure-metrics-csr-signer needs --secure-metrics-bind-address and no --secure-metrics-tls-cert-file")
	}
	return nil
}

func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}
