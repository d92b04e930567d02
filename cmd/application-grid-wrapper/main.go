// Command application-grid-wrapper serves kube-proxy the Services, Endpoints,
// EndpointSlices and Node of one edge node, filtered by topologyKeys, and
// proxies everything else to the (lite-)apiserver. See wrapper/README.md.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/logging"
	"github.com/servicegroup/servicegroup/internal/securemetrics"
	"github.com/servicegroup/servicegroup/internal/version"
	"github.com/servicegroup/servicegroup/wrapper"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "application-grid-wrapper:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends; args are the command line with the program name.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	logOptions := logging.AddFlags(fs)
	var (
		kubeconfig   = fs.String("kubeconfig", "", "kubeconfig of the upstream (lite-)apiserver; in-cluster config when empty")
		nodeName     = fs.String("node-name", os.Getenv("NODE_NAME"), "name of the node this wrapper serves (default $NODE_NAME)")
		bindAddress  = fs.String("bind-address", "127.0.0.1:51006", "address to serve on")
		certFile     = fs.String("tls-cert-file", "", "serving certificate (PEM), instead of --cert-dir's")
		keyFile      = fs.String("tls-private-key-file", "", "serving certificate's private key (PEM)")
		certDir      = fs.String("cert-dir", "", "directory for a self-signed serving certificate for --bind-address's host, made at the first start and kept ("+wrapper.ServingCertFile+", "+wrapper.ServingKeyFile+"), and a kubeconfig for clients that pins it ("+wrapper.ClientKubeconfigFile+"): clients then refuse anything else that takes the port")
		plainHTTP    = fs.Bool("insecure-plain-http", false, "serve plain HTTP: clients cannot tell the wrapper from any process that takes its port while it is down (demos and tests only)")
		clientCA     = fs.String("client-ca-file", "", "CA bundle: when set, clients must present a certificate it signed")
		clientNames  = fs.String("client-allowed-names", "", "comma-separated Common Names: with --client-ca-file, only a client certificate with one of these names is accepted (empty: any the CA signed)")
		metricsAddr  = fs.String("metrics-bind-address", "", "extra plain-HTTP address for /healthz, /readyz, /metrics (and /debug/pprof); none when empty")
		debug        = fs.Bool("debug", false, "serve pprof under /debug/pprof/")
		bookmarks    = fs.Duration("bookmark-interval", wrapper.DefaultBookmarkInterval, "interval between BOOKMARK events to watchers that allow them")
		writeTimeout = fs.Duration("watch-write-timeout", wrapper.DefaultWatchWriteTimeout, "a watch whose client takes no batch of events for this long is cut off (it then resumes or relists)")
		reqTimeout   = fs.Duration("request-write-timeout", wrapper.DefaultRequestWriteTimeout, "an answer other than a watch that its client does not take within this is cut off")
		maxInFlight  = fs.Int("max-requests-inflight", wrapper.DefaultMaxRequestsInFlight, "requests other than watches served at once; beyond, 429 with Retry-After")
		maxWatches   = fs.Int("max-watches", wrapper.DefaultMaxWatches, "watches served at once; beyond, 429 with Retry-After")
		maxConns     = fs.Int("max-connections", defaultMaxConnections, "client connections open at once; more wait to be accepted")
		idleConns    = fs.Duration("idle-connection-timeout", defaultIdleTimeout, "a client connection with no request in flight for this long is closed")
		localRanges  = fs.String("local-endpoint-ranges", prefixList(wrapper.DefaultLocalEndpointRanges), "comma-separated CIDRs the superedge.io/local-endpoint annotation of default/kubernetes may point to; any other address leaves it unchanged")
		maxLag       = byteSize(wrapper.DefaultWatchMaxLagBytes)
		eventLog     = byteSize(wrapper.DefaultEventLogBytes)
		stateDir     = fs.String("state-dir", "", "directory for the snapshot of what is served (Services, EndpointSlices, Endpoints, this Node), served at start-up until upstream answers; nothing is kept on disk when empty (the DaemonSet sets /var/lib/application-grid-wrapper)")
		snapInterval = fs.Duration("snapshot-interval", wrapper.DefaultSnapshotInterval, "the most often the snapshot is rewritten after a change (and once more on a clean shutdown)")
		snapMaxAge   = fs.Duration("snapshot-max-age", wrapper.DefaultSnapshotMaxAge, "ignore a snapshot written longer ago than this at start-up; 0 serves any")
		chownState   = fs.String("chown-state-dir", "", "UID:GID: create --state-dir, give it to UID:GID with mode 0700 and exit (for a root init container; a hostPath DirectoryOrCreate is created root-owned)")
		loopbackAddr = fs.String("add-loopback-address", "", "ADDRESS/32 (or /128): put it on the network namespace's lo interface unless it is there, and exit (for a host-network init container with CAP_NET_ADMIN only: the node-local address the node's CoreDNS binds, e.g. 169.254.20.10/32)")
		restrictKeys = fs.Bool("require-node-restricted-topology-keys", false, "treat topologyKeys not under node-restriction.kubernetes.io/ (labels the NodeRestriction admission plugin lets a kubelet set on its own Node) as never matching: a Service keyed on one falls to its next key or \"*\"; without it a compromised node can label itself into any nodeunit's routing")
		printVersion = fs.Bool("version", false, "print the version and exit")
		getURL       = fs.String("get-loopback", "", "GET this loopback URL (e.g. http://127.0.0.1:51007/readyz), print the answer and exit, non-zero unless 200: for kubectl exec, the image having no shell")
	)
	site := addSiteStreamFlags(fs)
	secureMetrics := securemetrics.DefaultOptions()
	secureMetrics.AddFlags(fs)
	kubeProxyMetrics := fs.String("kube-proxy-metrics-url", "", "with --secure-metrics-bind-address: also serve this loopback URL (the node's kube-proxy's metrics, e.g. http://127.0.0.1:10249/metrics) at "+kubeProxyMetricsPath+" behind the same checks")
	fs.Var(&maxLag, "watch-max-lag-bytes", "how far (encoded size of events, e.g. 64Mi) a watcher may fall behind before it gets 410 Expired and relists")
	fs.Var(&eventLog, "event-log-bytes", "encoded size of the newest events per resource (e.g. 4Mi) a watch can resume from")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *printVersion {
		fmt.Println(version.Version)
		return nil
	}
	if *getURL != "" {
		return getLoopback(ctx, *getURL, os.Stdout)
	}
	if err := logOptions.Apply(); err != nil {
		return err
	}
	if *chownState != "" {
		return prepareStateDir(*stateDir, *chownState)
	}
	if *loopbackAddr != "" {
		return addLoopbackAddress(*loopbackAddr)
	}
	if *nodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required: the wrapper serves one node's view")
	}
	if (*certFile == "") != (*keyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if n := countSet(*certFile != "", *certDir != "", *plainHTTP); n != 1 {
		return errors.New("serve TLS with --cert-dir (self-signed, pinned by clients) or --tls-cert-file and --tls-private-key-file, or plain HTTP with --insecure-plain-http: exactly one")
	}
	if *clientCA != "" && *plainHTTP {
		return errors.New("--client-ca-file needs TLS, not --insecure-plain-http")
	}
	allowedNames := splitNames(*clientNames)
	if len(allowedNames) > 0 && *clientCA == "" {
		return errors.New("--client-allowed-names needs --client-ca-file")
	}
	if *clientCA == "" && !isLoopback(*bindAddress) {
		return fmt.Errorf("--bind-address %s is not a loopback address: it needs --client-ca-file (and TLS), or anyone who reaches it acts with the wrapper's credentials", *bindAddress)
	}

	ranges, err := parsePrefixes(*localRanges)
	if err != nil {
		return fmt.Errorf("--local-endpoint-ranges: %w", err)
	}
	siteOpts, err := site.options()
	if err != nil {
		return err
	}
	var cfg *rest.Config
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("upstream config: %w", err)
	}
	cfg.UserAgent = "application-grid-wrapper/" + version.Version

	if *snapMaxAge == 0 {
		*snapMaxAge = -1 // Options: negative is no limit
	}
	srv, err := wrapper.New(wrapper.Options{
		RequireNodeRestrictedTopologyKeys: *restrictKeys,
		NodeName:                          *nodeName, Upstream: cfg, Debug: *debug,
		BookmarkInterval: *bookmarks, WatchWriteTimeout: *writeTimeout, WatchMaxLagBytes: int64(maxLag), EventLogBytes: int64(eventLog),
		StateDir: *stateDir, SnapshotInterval: *snapInterval, SnapshotMaxAge: *snapMaxAge,
		AllowedHosts:        allowedHosts(*bindAddress),
		LocalEndpointRanges: ranges,
		RequestWriteTimeout: *reqTimeout, MaxRequestsInFlight: *maxInFlight, MaxWatches: *maxWatches,
		SiteStream: siteOpts,
	})
	if err != nil {
		return err
	}

	logger := klog.FromContext(ctx)

	if *maxConns < 1 || *maxInFlight < 1 || *maxWatches < 1 {
		return errors.New("--max-connections, --max-requests-inflight and --max-watches must be at least 1")
	}
	if *idleConns <= 0 {
		return errors.New("--idle-connection-timeout must be positive")
	}
	if *certDir != "" {
		host, _, _ := net.SplitHostPort(*bindAddress)
		if *certFile, *keyFile, err = wrapper.EnsureServingCert(logger, *certDir, host); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
		if err := wrapper.WriteClientKubeconfig(filepath.Join(*certDir, wrapper.ClientKubeconfigFile), "https://"+*bindAddress, *certFile); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
		// The node's CoreDNS reads the DNS view through this one.
		if err := wrapper.WriteClientKubeconfig(filepath.Join(*certDir, wrapper.DNSKubeconfigFile), "https://"+*bindAddress+wrapper.DNSPathPrefix, *certFile); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: *idleConns,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	if *certFile != "" {
		tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return err
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
		if *clientCA != "" {
			pem, err := os.ReadFile(*clientCA)
			if err != nil {
				return err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return fmt.Errorf("%s holds no PEM certificate", *clientCA)
			}
			tlsCfg.ClientCAs, tlsCfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
			if len(allowedNames) > 0 {
				tlsCfg.VerifyConnection = requireClientName(allowedNames)
			}
		}
		httpSrv.TLSConfig = tlsCfg
	}

	errCh := make(chan error, 4)
	if secureMetrics.Enabled() {
		if err := serveSecureMetrics(ctx, secureMetrics, cfg, *kubeProxyMetrics, errCh); err != nil {
			return err
		}
	}
	go func() { errCh <- srv.Run(ctx) }()
	if peerSrv := servePeers(ctx, srv, site, errCh); peerSrv != nil {
		defer peerSrv.Close()
	}
	// Both ports are bound as soon as they are free (another process may
	// hold one: Listen waits, logs and shows it in /readyz).
	go func() {
		ln, err := srv.Listen(ctx, *bindAddress, nil)
		if err != nil {
			errCh <- err
			return
		}
		// Connections past the cap wait in the kernel's accept queue, costing
		// the wrapper nothing; a connection that sends no request (headers
		// within ReadHeaderTimeout) or stays idle past IdleTimeout is closed.
		ln = netutil.LimitListener(ln, *maxConns)
		logger.Info("Serving", "address", ln.Addr().String(), "tls", httpSrv.TLSConfig != nil, "node", *nodeName, "upstream", cfg.Host, "version", version.Version)
		if httpSrv.TLSConfig != nil {
			// ServeTLS (not a tls.Listener) also sets up HTTP/2, which client-go prefers.
			errCh <- httpSrv.ServeTLS(ln, "", "")
			return
		}
		errCh <- httpSrv.Serve(ln)
	}()
	if *metricsAddr != "" {
		metricsSrv := &http.Server{Handler: srv.OpsHandler(), ReadHeaderTimeout: 30 * time.Second}
		go func() {
			mln, err := srv.Listen(ctx, *metricsAddr, nil)
			if err != nil {
				errCh <- err
				return
			}
			errCh <- metricsSrv.Serve(mln)
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

func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// Bounds on connections: kube-proxy holds one or two (HTTP/2 multiplexes).
const (
	defaultMaxConnections = 100
	readHeaderTimeout     = 30 * time.Second
	defaultIdleTimeout    = 90 * time.Second
)

// byteSize is a flag holding a positive size written as a Kubernetes
// quantity (4Mi, 64Mi, 1000000).
type byteSize int64

func (b *byteSize) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

func (b *byteSize) Set(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return err
	}
	if q.Sign() <= 0 {
		return fmt.Errorf("%s is not a positive size", v)
	}
	*b = byteSize(q.Value())
	return nil
}

// prefixList writes CIDRs as a flag value.
func prefixList(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

// parsePrefixes reads a comma-separated list of CIDRs; empty allows none.
func parsePrefixes(v string) ([]netip.Prefix, error) {
	out := []netip.Prefix{}
	for _, n := range splitNames(v) {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// splitNames splits a comma-separated flag value, dropping empty entries.
func splitNames(v string) []string {
	var out []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
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

// allowedHosts are the Host names requests may carry besides loopback ones:
// a non-loopback bind address's own host, or any when it listens on every
// address (the client certificate admits clients there).
func allowedHosts(bindAddress string) []string {
	host, _, err := net.SplitHostPort(bindAddress)
	if err != nil || isLoopback(bindAddress) {
		return nil
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return []string{"*"}
	}
	return []string{host}
}

// isLoopback reports whether addr (host:port) listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
