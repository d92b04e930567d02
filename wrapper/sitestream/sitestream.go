package sitestream

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// PeerAudience is the audience of the tokens wrappers of a site present to
// their leader (a projected ServiceAccount token with this audience): the
// apiserver refuses them, so a leader cannot replay one upstream.
const PeerAudience = "application-grid-wrapper-peer"

// Options turn on one cloud stream per site: the wrappers of the
// nodes that carry the same value of GroupLabel elect a leader (a Lease per
// site) that alone lists and watches the Services and EndpointSlices
// upstream; the others list and watch them from the leader. Zero values get
// the defaults below.
type Options struct {
	// GroupLabel is the node label whose value names this node's site.
	// A node without it streams from the apiserver on its own. Read once,
	// at start-up, for this node; the other nodes' values decide which
	// peers this wrapper serves and which Lease holder it follows.
	GroupLabel string
	// Group names this node's site directly (tests; overrides this node's
	// GroupLabel, not the peers').
	Group string
	// Namespace holds the Leases (default kube-system).
	Namespace string
	// AdvertiseAddress is the host:port peers reach this wrapper's peer
	// port at (PeerHandler served under PeerTLSConfig).
	AdvertiseAddress string
	// Token returns this wrapper's token for its leader (audience
	// PeerAudience); it is asked before every connection.
	Token func() (string, error)
	// AllowedUsers are the users (as upstream's TokenReview names them)
	// whose tokens the leader accepts; empty: this wrapper's own user (all
	// wrappers run as one ServiceAccount). The token must also be bound to
	// a Pod on a node of the site (NodeNameExtra).
	AllowedUsers []string
	// Lease timing (defaults 15s, 10s, 2s). A leader that cannot renew
	// within RenewDeadline stops serving its peers (members.go: when a
	// leader serves).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ServeOnlyRightAfterRenewal brings back the rule before issue 46: a
	// leader serves only within half the RenewDeadline of its last Lease
	// write answered, so a slow apiserver pauses it. Only to measure the
	// two side by side (BenchmarkAPIServerPerClient); no flag sets it.
	ServeOnlyRightAfterRenewal bool
	// HeartbeatInterval is how often the leader sends its peers' watches a
	// BOOKMARK (default 1s); a follower gives up a leader stream that
	// brought nothing for IdleTimeout (default 5s) and reads from the
	// apiserver until the leader answers again.
	HeartbeatInterval, IdleTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Namespace == "" {
		o.Namespace = metav1.NamespaceSystem
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 5 * time.Second
	}
}

// Stream is one wrapper's part in its site's stream: the unit-wide
// caches it can serve peers, the election, and the routing of its own
// unit-wide reads to the leader.
type Stream struct {
	opts   Options
	node   string
	client kubernetes.Interface // upstream, for the Lease, its Node, TokenReview

	caches  map[*watchcache.Resource]*unitCache // of watchcache.KubeProxySelected
	router  *peerRouter
	peers   *peerServer
	members *siteid.Members
	lock    atomic.Pointer[readLock] // the Lease, once the site is known
	nodes   *siteNodes               // which nodes are the site's (sitenodes.go)

	cert tls.Certificate
	pin  string // hex SHA-256 of cert's DER, published in the Lease

	mu    sync.Mutex
	group string // "" until known
}

// New prepares the site stream of node; client reaches upstream (for the
// Lease, this node, TokenReviews), meta too (the labels of its peers' and leaders' Nodes); limits and writeTimeout bound the peers'
// watches as the wrapper's own. The unit-wide informers read through a
// client whose transport Transport wraps, and list and watch through Tap.
func New(opts Options, node string, client kubernetes.Interface, meta metadata.Interface, limits watchcache.LogLimits, writeTimeout time.Duration) (*Stream, error) {
	opts.defaults()
	if opts.AdvertiseAddress == "" {
		return nil, errors.New("site stream: an advertise address for the peer port is required")
	}
	host, _, err := net.SplitHostPort(opts.AdvertiseAddress)
	if err != nil {
		return nil, err
	}
	if opts.Token == nil {
		return nil, errors.New("site stream: a peer token source is required")
	}
	if opts.GroupLabel == "" {
		// Also with Group: every peer's site is read from its Node's label.
		return nil, errors.New("site stream: a group label is required")
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(cert.Certificate[0])
	ss := &Stream{opts: opts, node: node, client: client, cert: cert, pin: hex.EncodeToString(sum[:]), group: opts.Group,
		caches: map[*watchcache.Resource]*unitCache{}}
	caches := make([]*unitCache, len(watchcache.KubeProxySelected))
	for i, r := range watchcache.KubeProxySelected {
		caches[i] = newUnitCache(r, limits)
		ss.caches[r] = caches[i]
	}
	ss.router = newPeerRouter(opts, siteid.Identity(node, opts.AdvertiseAddress, ss.pin))
	ss.members = ss.router.members
	ss.nodes = newSiteNodes(meta, opts.GroupLabel)
	ss.router.checkNode, ss.router.cachedNode = ss.nodes.check, ss.nodes.cached
	ss.members.InSite = func(node string) bool { in, known := ss.nodes.cached(node); return in && known }
	ss.peers = newPeerServer(ss, writeTimeout, caches)
	return ss, nil
}

// Transport wraps the transport the unit-wide informers read upstream
// through (rest.Config.Wrap): their lists and watches go to the leader
// while there is a usable one (route.go).
func (ss *Stream) Transport(upstream http.RoundTripper) http.RoundTripper {
	return ss.router.wrap(upstream)
}

// Tap taps the list and watch of r, one of watchcache.KubeProxySelected,
// into the cache peers read. client-go's ListWatch from the REST client
// sends the same requests as the typed clients, and the tapped ListWatch
// leaves the reflector's choice of watch-list as it is.
func (ss *Stream) Tap(r *watchcache.Resource, lw cache.ListerWatcher) cache.ListerWatcher {
	return ss.caches[r].tap(cache.ToListerWatcherWithContext(lw))
}

// Run finds this node's site, then campaigns and follows its leader until
// ctx ends. Until the site is known every read goes to the apiserver.
func (ss *Stream) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("Stream", true)
	go ss.router.run(ctx)
	go ss.peers.heartbeat(ctx, ss.opts.HeartbeatInterval)
	if err := wait.PollUntilContextCancel(ctx, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return ss.resolveGroup(ctx, logger), nil
	}); err != nil {
		return
	}
	group := ss.Group()
	if group == "" {
		return
	}
	// Whom to serve and whom to follow is decided by their nodes' site
	// label, read when they first ask or lead (sitenodes.go).
	ss.nodes.setSite(group)
	if err := ss.peers.resolveAllowedUsers(ctx, logger); err != nil {
		logger.Error(err, "Site stream off: cannot tell which users its peers run as")
		return
	}
	ss.elect(ctx, logger, group)
}

// resolveGroup reads this node's site from its label; true once decided.
func (ss *Stream) resolveGroup(ctx context.Context, logger klog.Logger) bool {
	if ss.Group() != "" {
		return true
	}
	n, err := ss.client.CoreV1().Nodes().Get(ctx, ss.node, metav1.GetOptions{})
	if err != nil {
		logger.V(2).Info("Cannot read this node's site yet", "err", err)
		return false
	}
	group := n.Labels[ss.opts.GroupLabel]
	if group == "" {
		logger.Info("This node has no site label: streaming from the apiserver on its own", "label", ss.opts.GroupLabel)
		return true
	}
	ss.mu.Lock()
	ss.group = group
	ss.mu.Unlock()
	return true
}

// Group is this node's site ("" while unknown or without one).
func (ss *Stream) Group() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.group
}
