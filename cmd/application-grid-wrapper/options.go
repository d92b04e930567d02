package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/servicegroup/servicegroup/internal/logging"
	"github.com/servicegroup/servicegroup/internal/securemetrics"
	"github.com/servicegroup/servicegroup/wrapper"
)

// options are the command's flags (AddFlags), what they imply (Complete),
// checked whole (Validate, validation.go) before Run (serve.go) touches
// anything: kube-proxy's cmd/kube-proxy/app/options.go shape.
type options struct {
	logs *logging.Options

	kubeconfig, nodeName, bindAddress string
	// Serving: TLS from files or --cert-dir, or plain HTTP; clients by CA.
	certFile, keyFile, certDir string
	plainHTTP                  bool
	clientCA, clientNames      string
	metricsAddr                string
	debug                      bool
	bookmarks, writeTimeout    time.Duration
	reqTimeout, idleConns      time.Duration
	maxInFlight, maxWatches    int
	// Per-uid budgets; 0 until Complete: a quarter of their total.
	uidInFlight, uidWatches  int
	uidConns                 int
	maxConns                 int
	localRanges              string
	localPorts               string
	ports                    []int32
	maxLag, eventLog         byteSize
	stateDir                 string
	snapInterval, snapMaxAge time.Duration
	restrictKeys             bool
	site                     siteStreamFlags
	secureMetrics            securemetrics.Options
	kubeProxyMetrics         string
	secureMetricsCSRSigner   string
	// One-shot modes: print or prepare something and exit.
	printVersion                 bool
	getURL, chownState, loopback string

	// Complete's.
	allowedNames []string
	ranges       []netip.Prefix
}

// newOptions has the flags' defaults.
func newOptions() *options {
	return &options{
		nodeName:      os.Getenv("NODE_NAME"),
		bindAddress:   "127.0.0.1:51006",
		bookmarks:     wrapper.DefaultBookmarkInterval,
		writeTimeout:  wrapper.DefaultWatchWriteTimeout,
		reqTimeout:    wrapper.DefaultRequestWriteTimeout,
		maxInFlight:   wrapper.DefaultMaxRequestsInFlight,
		maxWatches:    wrapper.DefaultMaxWatches,
		maxConns:      defaultMaxConnections,
		idleConns:     defaultIdleTimeout,
		localRanges:   prefixList(wrapper.DefaultLocalEndpointRanges),
		localPorts:    portList(wrapper.DefaultLocalEndpointPorts),
		maxLag:        wrapper.DefaultWatchMaxLagBytes,
		eventLog:      wrapper.DefaultEventLogBytes,
		snapInterval:  wrapper.DefaultSnapshotInterval,
		snapMaxAge:    wrapper.DefaultSnapshotMaxAge,
		site:          siteStreamFlags{namespace: "kube-system", maxConns: defaultPeerMaxConnections, maxConnsPerHost: defaultPeerMaxConnectionsPerHost},
		secureMetrics: securemetrics.DefaultOptions(),
	}
}

// Bounds on connections: kube-proxy holds one or two (HTTP/2 multiplexes).
const (
	defaultMaxConnections = 100
	readHeaderTimeout     = 30 * time.Second
	defaultIdleTimeout    = 90 * time.Second
)

// AddFlags registers every flag on fs.
func (o *options) AddFlags(fs *flag.FlagSet) {
	o.logs = logging.AddFlags(fs)
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "kubeconfig of the upstream (lite-)apiserver; in-cluster config when empty")
	fs.StringVar(&o.nodeName, "node-name", o.nodeName, "name of the node this wrapper serves (default $NODE_NAME)")
	fs.StringVar(&o.bindAddress, "bind-address", o.bindAddress, "address to serve on")
	fs.StringVar(&o.certFile, "tls-cert-file", o.certFile, "serving certificate (PEM), instead of --cert-dir's")
	fs.StringVar(&o.keyFile, "tls-private-key-file", o.keyFile, "serving certificate's private key (PEM)")
	fs.StringVar(&o.certDir, "cert-dir", o.certDir, "directory for a self-signed serving certificate for --bind-address's host, made at the first start and kept ("+wrapper.ServingCertFile+", "+wrapper.ServingKeyFile+"), and a kubeconfig for clients that pins it ("+wrapper.ClientKubeconfigFile+"): clients then refuse anything else that takes the port")
	fs.BoolVar(&o.plainHTTP, "insecure-plain-http", o.plainHTTP, "serve plain HTTP: clients cannot tell the wrapper from any process that takes its port while it is down (demos and tests only)")
	fs.StringVar(&o.clientCA, "client-ca-file", o.clientCA, "CA bundle: when set, clients must present a certificate it signed")
	fs.StringVar(&o.clientNames, "client-allowed-names", o.clientNames, "comma-separated Common Names: with --client-ca-file, only a client certificate with one of these names is accepted (empty: any the CA signed)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr, "extra plain-HTTP address for /healthz, /readyz, /metrics (and /debug/pprof); none when empty")
	fs.BoolVar(&o.debug, "debug", o.debug, "serve pprof under /debug/pprof/")
	fs.DurationVar(&o.bookmarks, "bookmark-interval", o.bookmarks, "interval between BOOKMARK events to watchers that allow them")
	fs.DurationVar(&o.writeTimeout, "watch-write-timeout", o.writeTimeout, "a watch whose client takes no batch of events for this long is cut off (it then resumes or relists)")
	fs.DurationVar(&o.reqTimeout, "request-write-timeout", o.reqTimeout, "an answer other than a watch that its client does not take within this is cut off")
	fs.IntVar(&o.maxInFlight, "max-requests-inflight", o.maxInFlight, "requests other than watches served at once; beyond, 429 with Retry-After")
	fs.IntVar(&o.maxWatches, "max-watches", o.maxWatches, "watches served at once; beyond, 429 with Retry-After")
	fs.IntVar(&o.uidInFlight, "max-requests-inflight-per-uid", o.uidInFlight, "of --max-requests-inflight, what the local clients of one uid other than root (by the owner of the client's socket; clients from other hosts count as one) may have served at once, at most half, so that root's (kube-proxy, the node's CoreDNS) always keep as many; 0: a quarter")
	fs.IntVar(&o.uidWatches, "max-watches-per-uid", o.uidWatches, "of --max-watches, the same for watches; 0: a quarter")
	fs.IntVar(&o.uidConns, "max-connections-per-uid", o.uidConns, "of --max-connections, the same for connections, a connection past it being closed at once; 0: a quarter")
	fs.IntVar(&o.maxConns, "max-connections", o.maxConns, "client connections open at once; more wait to be accepted")
	fs.DurationVar(&o.idleConns, "idle-connection-timeout", o.idleConns, "a client connection with no request in flight for this long is closed")
	fs.StringVar(&o.localRanges, "local-endpoint-ranges", o.localRanges, "comma-separated CIDRs the superedge.io/local-endpoint annotation of default/kubernetes may point to (a non-loopback address must also be one of this node's); any other address leaves it unchanged")
	fs.StringVar(&o.localPorts, "local-endpoint-ports", o.localPorts, "comma-separated ports the superedge.io/local-port annotation of default/kubernetes may name (SuperEdge's lite-apiserver's by default); any other port leaves it unchanged")
	fs.StringVar(&o.stateDir, "state-dir", o.stateDir, "directory for the snapshot of what is served (Services, EndpointSlices, Endpoints, this Node), served at start-up until upstream answers; nothing is kept on disk when empty (the DaemonSet sets /var/lib/application-grid-wrapper)")
	fs.DurationVar(&o.snapInterval, "snapshot-interval", o.snapInterval, "the most often the snapshot is rewritten after a change (and once more on a clean shutdown)")
	fs.DurationVar(&o.snapMaxAge, "snapshot-max-age", o.snapMaxAge, "ignore a snapshot written longer ago than this at start-up; 0 serves any")
	fs.StringVar(&o.chownState, "chown-state-dir", o.chownState, "UID:GID: create --state-dir, give it to UID:GID with mode 0700 and exit (for a root init container; a hostPath DirectoryOrCreate is created root-owned)")
	fs.StringVar(&o.loopback, "add-loopback-address", o.loopback, "ADDRESS/32 (or /128): put it on the network namespace's lo interface unless it is there, and exit (for a host-network init container with CAP_NET_ADMIN only: the node-local address the node's CoreDNS binds, e.g. 169.254.20.10/32)")
	fs.BoolVar(&o.restrictKeys, "require-node-restricted-topology-keys", o.restrictKeys, "treat topologyKeys not under node-restriction.kubernetes.io/ (labels the NodeRestriction admission plugin lets a kubelet set on its own Node) as never matching: a Service keyed on one falls to its next key or \"*\"; without it a compromised node can label itself into any nodeunit's routing")
	fs.BoolVar(&o.printVersion, "version", o.printVersion, "print the version and exit")
	fs.StringVar(&o.getURL, "get-loopback", o.getURL, "GET this loopback URL (e.g. http://127.0.0.1:51007/readyz), print the answer and exit, non-zero unless 200: for kubectl exec, the image having no shell")
	o.site.AddFlags(fs)
	o.secureMetrics.AddFlags(fs)
	fs.StringVar(&o.secureMetricsCSRSigner, "secure-metrics-csr-signer", o.secureMetricsCSRSigner, "with --secure-metrics-bind-address: ask this CertificateSigningRequest signer (the controller's servicegroup.io/metrics-serving) for a serving certificate naming this node and its addresses, with the wrapper's own token, and serve it once issued (renewed before it expires; the self-signed one until then)")
	fs.StringVar(&o.kubeProxyMetrics, "kube-proxy-metrics-url", o.kubeProxyMetrics, "with --secure-metrics-bind-address: also serve this loopback URL (the node's kube-proxy's metrics, e.g. http://127.0.0.1:10249/metrics) at "+kubeProxyMetricsPath+" behind the same checks")
	fs.Var(&o.maxLag, "watch-max-lag-bytes", "how far (encoded size of events, e.g. 64Mi) a watcher may fall behind before it gets 410 Expired and relists")
	fs.Var(&o.eventLog, "event-log-bytes", "encoded size of the newest events per resource (e.g. 4Mi) a watch can resume from")
}

// Complete works out what the flags imply; a value that cannot be read is
// an error naming its flag.
func (o *options) Complete() error {
	o.allowedNames = splitNames(o.clientNames)
	ranges, err := parsePrefixes(o.localRanges)
	if err != nil {
		return fmt.Errorf("--local-endpoint-ranges: %w", err)
	}
	o.ranges = ranges
	ports, err := parsePorts(o.localPorts)
	if err != nil {
		return fmt.Errorf("--local-endpoint-ports: %w", err)
	}
	o.ports = ports
	for _, b := range []struct {
		perUID *int
		total  int
	}{{&o.uidInFlight, o.maxInFlight}, {&o.uidWatches, o.maxWatches}, {&o.uidConns, o.maxConns}} {
		if *b.perUID == 0 {
			*b.perUID = max(1, b.total/4)
		}
	}
	if o.snapMaxAge == 0 {
		o.snapMaxAge = -1 // wrapper.Options: negative is no limit
	}
	return nil
}

// wrapperOptions are the wrapper's options; upstream is its apiserver.
func (o *options) wrapperOptions() wrapper.Options {
	return wrapper.Options{
		RequireNodeRestrictedTopologyKeys: o.restrictKeys,
		NodeName:                          o.nodeName, Debug: o.debug,
		BookmarkInterval: o.bookmarks, WatchWriteTimeout: o.writeTimeout, WatchMaxLagBytes: int64(o.maxLag), EventLogBytes: int64(o.eventLog),
		StateDir: o.stateDir, SnapshotInterval: o.snapInterval, SnapshotMaxAge: o.snapMaxAge,
		AllowedHosts:        allowedHosts(o.bindAddress),
		LocalEndpointRanges: o.ranges,
		LocalEndpointPorts:  o.ports,
		RequestWriteTimeout: o.reqTimeout, MaxRequestsInFlight: o.maxInFlight, MaxWatches: o.maxWatches,
		MaxRequestsInFlightPerUID: o.uidInFlight, MaxWatchesPerUID: o.uidWatches,
		SiteStream: o.site.options(),
	}
}

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

func portList(ps []int32) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strconv.Itoa(int(p))
	}
	return strings.Join(out, ",")
}

// parsePorts reads a comma-separated list of ports (1-65535); empty allows
// none.
func parsePorts(v string) ([]int32, error) {
	out := []int32{}
	for _, n := range splitNames(v) {
		p, err := strconv.ParseUint(n, 10, 16)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("%q is not a port number", n)
		}
		out = append(out, int32(p))
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
