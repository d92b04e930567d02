// Command coredns is CoreDNS v1.15 with its in-tree plugins (but for the
// few plugins.go leaves out) plus gridhosts, which runs just before
// kubernetes so it sees cluster names first and falls through to kubernetes
// for everything that is not a grid name.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/securemetrics"
	"github.com/servicegroup/servicegroup/internal/version"
	"github.com/servicegroup/servicegroup/metricscert"
	_ "github.com/servicegroup/servicegroup/plugin/gridhosts"
)

// anchor is the directive gridhosts goes in front of.
const anchor = "kubernetes"

func init() {
	directives, err := insertBefore(dnsserver.Directives, "gridhosts", anchor)
	if err != nil {
		panic(err) // a CoreDNS without "kubernetes" is a build mistake
	}
	dnsserver.Directives = directives
	caddy.AppName = coremain.CoreName
	caddy.AppVersion = coremain.CoreVersion + "+servicegroup." + version.Version
}

// insertBefore returns list with name inserted just before anchor.
func insertBefore(list []string, name, anchor string) ([]string, error) {
	for i, d := range list {
		if d == name {
			return nil, fmt.Errorf("directive %q already present", name)
		}
		if d == anchor {
			out := make([]string, 0, len(list)+1)
			out = append(out, list[:i]...)
			out = append(out, name)
			return append(out, list[i:]...), nil
		}
	}
	return nil, fmt.Errorf("directive %q not found", anchor)
}

// secureMetrics are CoreDNS's metrics (every plugin's, gridhosts' included)
// served to scrapers the apiserver vouches for; the prometheus directive
// stays on loopback.
var secureMetrics = securemetrics.DefaultOptions()

// secureMetricsCSRSigner and secureMetricsNodeName: ask this signer for a
// serving certificate naming the node (as the wrapper does).
var secureMetricsCSRSigner, secureMetricsNodeName string

// secureMetricsMaxConnections bounds the secure-metrics port's open
// connections, as the wrapper's --max-connections bounds its ports.
const secureMetricsMaxConnections = 32

func init() {
	secureMetrics.AddFlags(flag.CommandLine)
	flag.StringVar(&secureMetricsCSRSigner, "secure-metrics-csr-signer", "", "with -secure-metrics-bind-address: ask this CertificateSigningRequest signer (the controller's "+metricscert.SignerName+"), with the token of -secure-metrics-kubeconfig (in-cluster: the pod-bound one), for a serving certificate naming -secure-metrics-node-name and its addresses, and serve it once issued (renewed before it expires; the self-signed one until then)")
	flag.StringVar(&secureMetricsNodeName, "secure-metrics-node-name", os.Getenv("NODE_NAME"), "the node -secure-metrics-csr-signer's certificate names (default: $NODE_NAME)")
}

func main() {
	flag.Parse() // coremain.Run parses again; the same flags, the same values
	if secureMetrics.Enabled() {
		// CoreDNS's own listeners use SO_REUSEPORT (the node's DaemonSet is in
		// the host network: old and new pod bind together during an update).
		secureMetrics.ReusePort = true
		// Any local user may bind the port first (a port above 1024, the
		// host network): CoreDNS answers DNS meanwhile and binds it once
		// free, never exits for it. Scrapers are few: a small cap.
		secureMetrics.Listen = securemetrics.RetryListen(2*time.Second, func(err error) {
			fmt.Fprintf(os.Stderr, "coredns: secure metrics: waiting for %s: %v\n", secureMetrics.BindAddress, err)
		})
		if secureMetrics.MaxConnections == 0 {
			secureMetrics.MaxConnections = secureMetricsMaxConnections
		}
		if err := requestSecureMetricsCertificate(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "coredns:", err)
			os.Exit(1)
		}
		// CoreDNS's plugins register on the default registry.
		s, err := securemetrics.New(secureMetrics, nil, promhttp.Handler())
		if err != nil {
			fmt.Fprintln(os.Stderr, "coredns:", err)
			os.Exit(1)
		}
		go func() {
			if err := s.Serve(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "coredns: secure metrics:", err)
				os.Exit(1)
			}
		}()
	}
	coremain.Run()
}

// requestSecureMetricsCertificate sets secureMetrics.IssuedCertificate from
// -secure-metrics-csr-signer, when set.
func requestSecureMetricsCertificate(ctx context.Context) error {
	if secureMetricsCSRSigner == "" {
		return nil
	}
	if secureMetrics.CertFile != "" {
		return errors.New("-secure-metrics-csr-signer and -secure-metrics-tls-cert-file exclude each other")
	}
	cfg, err := secureMetrics.RESTConfig(nil)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	issued, err := metricscert.RequestServingCertificate(ctx, kube, secureMetricsCSRSigner, secureMetricsNodeName,
		"system:servicegroup-coredns-metrics:"+secureMetricsNodeName)
	if err != nil {
		return fmt.Errorf("-secure-metrics-csr-signer: %w", err)
	}
	secureMetrics.IssuedCertificate = issued
	return nil
}
