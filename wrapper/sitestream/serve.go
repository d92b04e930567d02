package sitestream

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// freshWait is how long a peer's list at a version the leader has not
// reached yet waits for it, as the apiserver's watch cache waits, before it
// is answered 504 (too large resource version; the follower then lists from
// the apiserver). A watch from such a version is resumed at once (the unit
// caches are mirror stores).
const freshWait = 3 * time.Second

// peerServer answers the list and watch requests of the site's other
// wrappers from the unit-wide caches, while this wrapper leads.
type peerServer struct {
	ss     *Stream
	view   http.Handler // the peers' view of the caches, with its request info
	caches []*unitCache

	mu sync.Mutex
	// leadership is done when the Lease is lost; nil: not leading. serve
	// is done sooner, when the Lease has not been renewed recently (see
	// renewedRecently): peer watches end with it.
	leadership  context.Context
	serve       context.Context
	serveCancel context.CancelFunc
	authn       authenticator.Request
	allowed     sets.Set[string]
	failures    *authFailures
	// pauses counts how often a leader stopped serving while it still
	// held its leadership (checkRenewed).
	pauses atomic.Int64
}

func newPeerServer(ss *Stream, writeTimeout time.Duration, caches []*unitCache) *peerServer {
	p := &peerServer{ss: ss, caches: caches, failures: newAuthFailures()}
	var served []*watchcache.Served
	for _, c := range caches {
		served = append(served, &watchcache.Served{Resource: c.resource, Store: c.store})
	}
	// Its readiness is leadership, checked (ServeHTTP) before the view.
	p.view = watchcache.WithRequestInfo(watchcache.NewView(watchcache.ViewConfig{
		Served:            served,
		Admit:             p.admit,
		Unrouted:          http.HandlerFunc(refusePeer),
		WatchWriteTimeout: writeTimeout,
	}))
	return p
}

// resolveAllowedUsers builds the TokenReview authenticator and, unless
// configured, allows the user this wrapper itself runs as.
func (p *peerServer) resolveAllowedUsers(ctx context.Context, logger klog.Logger) error {
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  p.ss.client.AuthenticationV1(),
		TokenAccessReviewTimeout: 5 * time.Second,
		WebhookRetryBackoff:      &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
		CacheTTL:                 10 * time.Minute,
		APIAudiences:             authenticator.Audiences{PeerAudience},
	}.New()
	if err != nil {
		return err
	}
	allowed := sets.New(p.ss.opts.AllowedUsers...)
	if allowed.Len() == 0 {
		var review *authenticationv1.SelfSubjectReview
		if err := wait.PollUntilContextCancel(ctx, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			review, err = p.ss.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				logger.V(2).Info("Cannot ask upstream who this wrapper is yet", "err", err)
			}
			return err == nil, nil
		}); err != nil {
			return err
		}
		allowed.Insert(review.Status.UserInfo.Username)
	}
	logger.Info("Site stream peers must authenticate as", "users", sets.List(allowed))
	p.mu.Lock()
	p.authn, p.allowed = authn, allowed
	p.mu.Unlock()
	return nil
}

// setLeading starts (ctx) or ends (nil) serving peers; it reports whether
// it was serving them.
func (p *peerServer) setLeading(ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.leadership != nil
	if p.serveCancel != nil {
		p.serveCancel()
	}
	p.leadership, p.serve, p.serveCancel = ctx, nil, nil
	if ctx != nil {
		p.serve, p.serveCancel = context.WithCancel(ctx)
	}
	return was
}

// leading is done when this wrapper stops serving its peers; nil while it
// does not serve them.
func (p *peerServer) leading() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Checked here too, not only by the heartbeat: a leader resuming from
	// a pause serves nothing before its next tick.
	if p.serve != nil && (p.serve.Err() != nil || !p.ss.renewedRecently()) {
		return nil
	}
	return p.serve
}

// checkRenewed stops serving peers while the Lease has not been renewed
// recently (renewedRecently, members.go), and serves them again once it
// is. A leader cut from the cloud hears no more changes, and client-go's
// elector gives up the Lease only after a RetryPeriod and a RenewDeadline,
// and then tries to release it for as long again: serving its followers a
// frozen view all that while would hold them on it (its heartbeats keep
// them), so it stops first and they read from the apiserver.
func (p *peerServer) checkRenewed(logger klog.Logger) {
	fresh := p.ss.renewedRecently()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leadership == nil || p.leadership.Err() != nil {
		return
	}
	serving := p.serve != nil && p.serve.Err() == nil
	switch {
	case serving && !fresh:
		p.serveCancel()
		p.pauses.Add(1)
		logger.Info("The site's Lease was not renewed lately: not serving peers until it is", "within", p.ss.renewWindow(), "orWhileNoneFailedWithin", p.ss.opts.RenewDeadline)
	case !serving && fresh:
		p.serve, p.serveCancel = context.WithCancel(p.leadership)
		logger.Info("The site's Lease is renewed again: serving peers")
	}
}

func (p *peerServer) synced() bool {
	for _, c := range p.caches {
		if !c.synced.Load() {
			return false
		}
	}
	return true
}

// heartbeat makes a BOOKMARK due for every peer watch each interval: a
// follower that hears nothing for its idle timeout gives the leader up.
func (p *peerServer) heartbeat(ctx context.Context, every time.Duration) {
	stores := make([]*watchcache.Store, len(p.caches))
	for i, c := range p.caches {
		stores[i] = c.store
	}
	watchcache.RunBookmarks(ctx, every, stores, false, func() { p.checkRenewed(klog.FromContext(ctx)) })
}

// TLSConfig serves the peer port under this process's own certificate,
// whose SHA-256 the Lease publishes to the followers.
func (p *peerServer) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{p.ss.cert}, NextProtos: []string{"h2", "http/1.1"}}
}

// ServeHTTP answers a peer: authenticated, only list and watch of the
// unit-wide resources within kube-proxy's selection, only while leading.
func (p *peerServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p.mu.Lock()
	authn, allowed := p.authn, p.allowed
	p.mu.Unlock()
	if authn == nil {
		w.Header().Set("Retry-After", "1")
		watchcache.WriteError(w, req, apierrors.NewTooManyRequests("not ready for peers", 1))
		return
	}
	// A refused client does not keep its connection: each new try costs it
	// a TLS handshake, and holds no slot meanwhile.
	src := host(req.RemoteAddr)
	if p.failures.exhausted(src, time.Now()) {
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "2")
		watchcache.WriteError(w, req, apierrors.NewTooManyRequests("too many failed authentications from "+src, 2))
		return
	}
	// The TokenReview asks for the peer audience: a token the apiserver
	// would accept is refused here, and the other way round.
	resp, ok, err := authn.AuthenticateRequest(req.WithContext(authenticator.WithAudiences(req.Context(), authenticator.Audiences{PeerAudience})))
	if err != nil || !ok {
		p.failures.failed(src, time.Now())
		klog.FromContext(req.Context()).V(1).Info("Refused a peer", "remote", req.RemoteAddr, "err", err)
		w.Header().Set("Connection", "close")
		watchcache.WriteError(w, req, apierrors.NewUnauthorized("a token of a wrapper of this site is required"))
		return
	}
	if !allowed.Has(resp.User.GetName()) {
		p.failures.failed(src, time.Now())
		klog.FromContext(req.Context()).Info("Refused a peer", "remote", req.RemoteAddr, "user", resp.User.GetName())
		w.Header().Set("Connection", "close")
		watchcache.WriteError(w, req, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("user %q is not a wrapper of this site", resp.User.GetName())))
		return
	}
	// The peer's node is the one its token is bound to (a projected token
	// of a Pod on it), never one it names.
	node := boundNode(resp.User.GetExtra())
	if node == "" {
		p.failures.failed(src, time.Now())
		klog.FromContext(req.Context()).Info("Refused a peer: its token is not bound to a Pod", "remote", req.RemoteAddr, "user", resp.User.GetName())
		w.Header().Set("Connection", "close")
		watchcache.WriteError(w, req, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf(
			"the token of %q names no node: a peer presents the projected ServiceAccount token of its Pod (audience %s), which the apiserver binds to the Pod's node", resp.User.GetName(), PeerAudience)))
		return
	}
	lead := p.leading()
	if site := p.ss.Group(); site == "" || req.Header.Get(siteHeader) != site {
		lead = nil // not this follower's site's leader
	} else {
		in, err := p.ss.nodes.check(req.Context(), node, peerRecheck)
		if err != nil {
			klog.FromContext(req.Context()).V(1).Info("Cannot tell a peer's site yet", "remote", req.RemoteAddr, "node", node, "err", err)
			w.Header().Set("Retry-After", "1")
			watchcache.WriteError(w, req, apierrors.NewTooManyRequests(fmt.Sprintf("the site of node %q cannot be read yet", node), 1))
			return
		}
		if !in {
			p.failures.failed(src, time.Now())
			klog.FromContext(req.Context()).Info("Refused a peer: its node is not in this site", "remote", req.RemoteAddr, "node", node, "site", site)
			w.Header().Set("Connection", "close")
			watchcache.WriteError(w, req, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf(
				"node %q, whose Pod's token this is, is not in site %q (label %s)", node, site, p.ss.opts.GroupLabel)))
			return
		}
		// The identity a peer sends is a hint to reach it by (its address
		// and certificate): it must be its own node's.
		if id := req.Header.Get(peerHeader); id != "" {
			if named, _, _, ok := siteid.Parse(id); !ok || named != node {
				p.failures.failed(src, time.Now())
				klog.FromContext(req.Context()).Info("Refused a peer: it names another node than its token's", "remote", req.RemoteAddr, "node", node, "named", named)
				w.Header().Set("Connection", "close")
				watchcache.WriteError(w, req, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf(
					"the peer identity %q is not of node %q, whose Pod's token this is", id, node)))
				return
			}
			p.ss.members.Add(id)
		}
		if req.URL.Path == sitePath {
			p.serveSite(w)
			return
		}
	}
	if req.URL.Path == "/readyz" {
		if lead == nil || !p.synced() {
			http.Error(w, "not leading", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
		return
	}
	if lead == nil || !p.synced() {
		w.Header().Set("Retry-After", "1")
		watchcache.WriteError(w, req, apierrors.NewTooManyRequests("not the site's leader", 1))
		return
	}
	// Peer watches end with leadership: the follower resumes elsewhere.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	stop := context.AfterFunc(lead, cancel)
	defer stop()
	p.view.ServeHTTP(w, req.WithContext(ctx))
}

// boundNode is the node a Pod-bound token's review names ("" for none).
func boundNode(extra map[string][]string) string {
	if v := extra[NodeNameExtra]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// admit: only lists and watches within kube-proxy's selection. A list at a
// version the cache has not reached waits for it (freshWait at most); a
// watch gets a BOOKMARK at once: a watch with an event is resumed, not
// relisted, by a follower whose leader dies within a second.
func (p *peerServer) admit(w http.ResponseWriter, req *http.Request, verb string, r *watchcache.Served, sel labels.Selector) bool {
	if (verb != "list" && verb != "watch") || !watchcache.WithinKubeProxySelection(sel) {
		refusePeer(w, req)
		return false
	}
	if verb == "list" && !r.Store.WaitFresh(req.Context(), mustRV(req), freshWait) {
		r.WriteError(w, req, watchcache.TooLargeError(mustRV(req), r.Store.Current()))
		return false
	}
	if verb == "watch" {
		time.AfterFunc(50*time.Millisecond, r.Store.Bookmark)
	}
	return true
}

// refusePeer answers what peers may not read.
func refusePeer(w http.ResponseWriter, req *http.Request) {
	info, _ := request.RequestInfoFrom(req.Context())
	watchcache.WriteError(w, req, apierrors.NewForbidden(schema.GroupResource{Resource: info.Resource}, info.Name, fmt.Errorf("peers list and watch only what kube-proxy selects")))
}

func mustRV(req *http.Request) uint64 {
	v, _ := strconv.ParseUint(req.URL.Query().Get("resourceVersion"), 10, 64)
	return v
}

// PeerHandler serves the site's other wrappers on the peer port (under
// PeerTLSConfig).
func (ss *Stream) PeerHandler() http.Handler { return watchcache.WithRequestLog(ss.peers) }

// PeerTLSConfig is the peer port's TLS configuration.
func (ss *Stream) PeerTLSConfig() *tls.Config { return ss.peers.TLSConfig() }

// Source is the node whose wrapper this one reads Services and
// EndpointSlices from: "" for the apiserver (no leader, this wrapper leads,
// or its leader is given up).
func (ss *Stream) Source() string {
	if t := ss.router.source(); t != nil {
		return t.node
	}
	return ""
}

// FailedRequests counts the lists and watches of Services and
// EndpointSlices that failed back to this wrapper's informers.
func (ss *Stream) FailedRequests() int64 { return ss.router.failedRequests.Load() }

// Pauses counts how often this wrapper, leading, stopped serving its peers
// because its Lease was not renewed lately (tests, benchmarks).
func (ss *Stream) Pauses() int64 { return ss.peers.pauses.Load() }

// LeaderGiveUps counts how often this wrapper gave up its leader and read
// from the apiserver instead (tests, benchmarks).
func (ss *Stream) LeaderGiveUps() int64 { return ss.router.givenUps.Load() }
