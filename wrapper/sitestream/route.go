package sitestream

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// siteHeader names the follower's site: a leader serves its own site only
// (a follower that read another site's holder, or a leader that lost its
// Lease and won another, is refused and campaigns again).
const siteHeader = "X-Application-Grid-Wrapper-Site"

// peerTarget is a leader as its Lease names it.
type peerTarget struct {
	node, addr, pin string
	transport       *http.Transport
	// checked is when its node was last found in the site (r.mu).
	checked time.Time
}

// peerRouter is the transport under the unit-wide informers of a follower:
// their list and watch requests go to the leader while there is a usable
// one, everything else (and everything while there is none) upstream. A
// leader that fails a request, or whose stream brings nothing for the idle
// timeout, is given up until it answers a probe again: the request is sent
// upstream at once, so the informer never sees the failure and resumes
// from its resourceVersion, which the apiserver and every leader share.
type peerRouter struct {
	opts Options
	self string       // this wrapper's identity in the Lease
	site atomic.Value // string: this wrapper's site, sent to the leader

	mu       sync.Mutex
	leader   *peerTarget   // nil: none, or this wrapper leads
	badUntil time.Time     // the leader is not used before
	changed  chan struct{} // closed (and replaced) when leader or badUntil change
	streams  map[*routedBody]struct{}
	// leaderWatches counts watches served by a leader (tests, metrics).
	leaderWatches atomic.Int64
	// heldRequests counts requests held because upstream did not answer;
	// failedRequests those that failed back to the informers (tests).
	heldRequests, failedRequests atomic.Int64
	// givenUps counts the leaders given up (tests, benchmarks).
	givenUps atomic.Int64
	// upstream is the transport under the router (set by wrap).
	upstream http.RoundTripper
	// members are the site's wrappers heard of (members.go, siteid).
	members *siteid.Members
	// checkNode tells whether a node carries this site's label value,
	// reading it when the last answer is older than maxAge; cachedNode
	// gives the last answer alone (both nil: every node does, for tests of
	// the routing alone). A Lease holder on another node is not followed.
	checkNode  func(ctx context.Context, node string, maxAge time.Duration) (bool, error)
	cachedNode func(node string) (in, known bool)
	// refused is the last holder not followed, logged once.
	refused string
	// setting orders setLeader's calls: one that a later call overtook
	// while it read the holder's node changes nothing.
	setting atomic.Uint64
}

// peerRetry is how long a leader that failed is left alone before a probe.
const peerRetry = 10 * time.Second

func newPeerRouter(opts Options, self string) *peerRouter {
	return &peerRouter{opts: opts, self: self, streams: map[*routedBody]struct{}{}, changed: make(chan struct{}), members: siteid.NewMembers()}
}

// notifyLocked tells waiters the source may have changed; r.mu is held.
func (r *peerRouter) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// following reports whether another wrapper serves this one (a leader that
// has not been given up), and returns a channel closed at the next change.
func (r *peerRouter) following() (bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader != nil && r.badUntil.IsZero(), r.changed
}

func (r *peerRouter) wrap(rt http.RoundTripper) http.RoundTripper {
	r.mu.Lock()
	r.upstream = rt
	r.mu.Unlock()
	return r
}

// setLeader follows the Lease's holder ("" for none). Streams from any
// other source end (cleanly: the informers resume from their version), so
// every follower moves to a new leader, and back upstream when there is
// none.
//
// The holder's node is read from the apiserver first (the Lease was just
// read from it), to tell whether it is of this site.
func (r *peerRouter) setLeader(logger klog.Logger, identity string) {
	r.follow(logger, identity, true)
}

// follow follows identity; read: its node is read from the apiserver, else
// (a leader a peer names while the Lease cannot be read) the last answer
// about it decides, and a node never read is not followed.
func (r *peerRouter) follow(logger klog.Logger, identity string, read bool) {
	turn := r.setting.Add(1)
	var t *peerTarget
	if node, addr, pin, ok := siteid.Parse(identity); ok && identity != r.self {
		if r.foreign(logger, node, identity, read) {
			identity = ""
		} else {
			t = &peerTarget{node: node, addr: addr, pin: pin, transport: pinnedTransport(pin), checked: time.Now()}
			r.members.Add(identity)
		}
	} else if identity != "" && !ok {
		logger.Info("Ignoring a Lease holder that is not a wrapper's identity", "holder", identity)
	}
	r.mu.Lock()
	if r.setting.Load() != turn {
		r.mu.Unlock()
		return
	}
	old := r.leader
	if old != nil && t != nil && old.addr == t.addr && old.pin == t.pin {
		old.checked = t.checked
		r.mu.Unlock()
		return
	}
	r.leader, r.badUntil = t, time.Time{}
	r.notifyLocked()
	cut := r.cutLocked(func(b *routedBody) bool { return b.target != t })
	r.mu.Unlock()
	if old != nil {
		old.transport.CloseIdleConnections()
	}
	leaderName := ""
	if t != nil {
		leaderName = t.node
	}
	logger.Info("Site stream source changed", "leader", leaderName, "self", identity != "" && t == nil, "streamsMoved", cut)
}

// foreign reports whether a leader's node is not one of this site's: a
// stolen token of another site's node can hold this site's Lease (nothing
// but the Lease's name ties it to a site), and this wrapper must not read
// Services and EndpointSlices from it. It then reads from the apiserver,
// as without a leader, and campaigns until the Lease expires. Logged once
// per holder.
//
// read: the node is read from the apiserver (its last answer stands if
// that fails); otherwise the last answer alone decides.
func (r *peerRouter) foreign(logger klog.Logger, node, identity string, read bool) bool {
	if r.checkNode == nil {
		return false
	}
	in, err := r.holderInSite(logger, node, read)
	if in {
		return false
	}
	r.mu.Lock()
	again := r.refused == identity
	r.refused = identity
	r.mu.Unlock()
	if !again {
		site, _ := r.site.Load().(string)
		if err != nil {
			logger.Info("Not following the site's Lease holder: cannot tell whether its node is in this site; reading from the apiserver",
				"holderNode", node, "site", site, "label", r.opts.GroupLabel, "err", err)
		} else {
			logger.Info("Not following the site's Lease holder: its node is not in this site (a wrapper of another site, or a stolen token); reading from the apiserver",
				"holderNode", node, "site", site, "label", r.opts.GroupLabel)
		}
	}
	return true
}

// holderInSite reads node (read), or takes the last answer about it.
func (r *peerRouter) holderInSite(logger klog.Logger, node string, read bool) (bool, error) {
	if read {
		return r.checkNode(klog.NewContext(context.Background(), logger), node, 0)
	}
	if in, known := r.cachedNode(node); known {
		return in, nil
	}
	return false, errors.New("its node was never read, and the apiserver cannot be reached")
}

// recheckLeader reads the node of the leader followed again, once it was
// last found in the site more than peerRecheck ago: a leader whose node
// has left the site is no longer followed (this wrapper then reads from
// the apiserver and campaigns, and the Lease's next holder is read again).
func (r *peerRouter) recheckLeader(ctx context.Context, logger klog.Logger) {
	r.mu.Lock()
	l := r.leader
	if r.checkNode == nil || l == nil || time.Since(l.checked) < peerRecheck {
		r.mu.Unlock()
		return
	}
	l.checked = time.Now()
	r.mu.Unlock()
	go func() {
		in, err := r.checkNode(ctx, l.node, 0)
		if in || err != nil {
			return
		}
		r.mu.Lock()
		if r.leader != l {
			r.mu.Unlock()
			return
		}
		r.setting.Add(1) // a setLeader under way must not follow l again
		r.leader, r.badUntil = nil, time.Time{}
		r.notifyLocked()
		cut := r.cutLocked(func(b *routedBody) bool { return b.target == l })
		r.mu.Unlock()
		l.transport.CloseIdleConnections()
		site, _ := r.site.Load().(string)
		logger.Info("Not following the site's leader any more: its node is no longer in this site; reading from the apiserver",
			"leader", l.node, "site", site, "label", r.opts.GroupLabel, "streamsMoved", cut)
	}()
}

// addMembers remembers the members a leader names, reading the nodes of
// those not read within siteid.MemberTTL first (siteid.Members keeps only
// the site's).
func (r *peerRouter) addMembers(ctx context.Context, ids []string) {
	if r.checkNode != nil {
		for _, id := range ids {
			if node, _, _, ok := siteid.Parse(id); ok && id != r.self {
				_, _ = r.checkNode(ctx, node, siteid.MemberTTL)
			}
		}
	}
	r.members.Add(ids...)
}

// cutLocked ends the streams match selects; r.mu is held.
func (r *peerRouter) cutLocked(match func(*routedBody) bool) int {
	n := 0
	for b := range r.streams {
		if match(b) {
			b.cut()
			delete(r.streams, b)
			n++
		}
	}
	return n
}

// source returns the leader to use, or nil for upstream.
func (r *peerRouter) source() *peerTarget {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil || time.Now().Before(r.badUntil) {
		return nil
	}
	return r.leader
}

// giveUp stops using t for peerRetry; its streams end.
func (r *peerRouter) giveUp(logger klog.Logger, t *peerTarget, why string) {
	r.mu.Lock()
	if r.leader != t {
		r.mu.Unlock()
		return
	}
	r.badUntil = time.Now().Add(peerRetry)
	r.notifyLocked()
	r.cutLocked(func(b *routedBody) bool { return b.target == t })
	r.mu.Unlock()
	r.givenUps.Add(1)
	logger.Info("Site stream leader given up: reading from the apiserver", "leader", t.node, "reason", why, "retryIn", peerRetry)
}

// unitWide reports whether req is a list or watch the leader serves: of
// what kube-proxy selects, across namespaces.
func unitWide(req *http.Request) bool {
	return req.Method == http.MethodGet && watchcache.KubeProxySelectedPath(req.URL.Path)
}

func (r *peerRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	upstream := r.upstream
	r.mu.Unlock()
	if !unitWide(req) {
		return upstream.RoundTrip(req)
	}
	logger := klog.FromContext(req.Context())
	if t := r.source(); t != nil {
		resp, err := r.viaLeader(req, t)
		if err == nil {
			return resp, nil
		}
		r.giveUp(logger, t, err.Error())
	}
	resp, t, err := r.upstreamUntilLeader(req, upstream)
	if err != nil {
		r.failedRequests.Add(1)
	}
	if err != nil || !watchcache.IsWatch(req) || t != nil { // a leader's watch is tracked by viaLeader
		return resp, err
	}
	r.track(resp, nil)
	return resp, nil
}

// upstreamUntilLeader sends req upstream, and to the leader instead if one
// becomes usable before upstream answers: a request waiting on an apiserver
// this wrapper cannot reach (its cloud link cut) moves to the leader it
// learns of from its peers, rather than hanging until the connection to the
// apiserver is found dead. A request that upstream did not answer at all
// is held the same way (see holdUnanswered), and sent upstream again every
// RetryPeriod or so, until a source answers or the request's context ends.
// It returns the leader that answered, or nil.
func (r *peerRouter) upstreamUntilLeader(req *http.Request, upstream http.RoundTripper) (*http.Response, *peerTarget, error) {
	type result struct {
		resp *http.Response
		err  error
	}
	ctx, cancel := context.WithCancel(req.Context())
	done := make(chan result, 1)
	send := func() {
		go func() {
			resp, err := upstream.RoundTrip(req.WithContext(ctx))
			done <- result{resp, err}
		}()
	}
	send()
	inFlight, held := true, false
	var retry <-chan time.Time
	var ended <-chan struct{} // the request's end, while none is in flight
	// changed is taken once and renewed only when it fires: a leader set
	// while this loop handles an answer or a retry still closes it, and
	// is seen at the next select (taking it afresh at each turn missed
	// such a change, and the request then waited on upstream alone).
	_, changed := r.following()
	for {
		select {
		case res := <-done:
			inFlight = false
			if res.err == nil {
				if held {
					klog.FromContext(req.Context()).V(2).Info("Site stream request answered by the apiserver after it was held", "path", req.URL.Path)
				}
				res.resp.Body = &cancelOnClose{ReadCloser: res.resp.Body, cancel: cancel}
				return res.resp, nil, nil
			}
			if !holdUnanswered(req, res.err) {
				cancel()
				return nil, nil, res.err
			}
			if !held {
				held = true
				r.heldRequests.Add(1)
				klog.FromContext(req.Context()).V(2).Info("Site stream request unanswered: holding it until a source answers", "path", req.URL.Path, "err", res.err)
			}
			retry, ended = time.After(wait.Jitter(r.opts.RetryPeriod, 0.5)), req.Context().Done()
		case <-retry:
			retry, ended, inFlight = nil, nil, true
			send()
		case <-ended:
			cancel()
			return nil, nil, req.Context().Err()
		case <-changed:
			_, changed = r.following()
			t := r.source()
			if t == nil {
				continue
			}
			resp, err := r.viaLeader(req, t)
			if err != nil {
				r.giveUp(klog.FromContext(req.Context()), t, err.Error())
				continue
			}
			cancel()
			if inFlight {
				go func() {
					if res := <-done; res.err == nil {
						res.resp.Body.Close()
					}
				}()
			}
			return resp, t, nil
		}
	}
}

// holdUnanswered reports whether a unit-wide request that upstream did not
// answer (err: no response at all) is held rather than failed. Failed, it
// would reach client-go's reflector, which tries again only at its next
// backoff step (0.8 s doubling to 30 s, jittered): a wrapper cut from the
// cloud would then stay on its old view for that long after a leader it
// can read from became known. Held, it goes to that leader at once, or
// upstream as soon as the apiserver answers. A refusal (401, 403, a
// certificate the wrapper does not trust) is not held: the wrapper's
// snapshot check must see it.
func holdUnanswered(req *http.Request, err error) bool {
	return req.Context().Err() == nil && !snapshottrust.UpstreamRefuses(err)
}

// cancelOnClose ends a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// viaLeader sends req to t with this wrapper's peer token instead of its
// upstream credentials. Any answer but success is an error: the caller asks
// upstream instead.
func (r *peerRouter) viaLeader(req *http.Request, t *peerTarget) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host, out.Host = "https", t.addr, ""
	out.Header.Del("Authorization")
	for k := range out.Header {
		if strings.HasPrefix(k, "Impersonate-") {
			out.Header.Del(k)
		}
	}
	resp, err := r.sendAsPeer(out, t, "leader")
	if err != nil {
		return nil, err
	}
	if watchcache.IsWatch(req) {
		r.track(resp, t)
		r.leaderWatches.Add(1)
	}
	return resp, nil
}

// track registers a watch's body so a change of source can end it.
func (r *peerRouter) track(resp *http.Response, t *peerTarget) {
	b := &routedBody{ReadCloser: resp.Body, target: t, router: r, started: time.Now()}
	b.lastRead.Store(time.Now().UnixNano())
	resp.Body = b
	r.mu.Lock()
	defer r.mu.Unlock()
	// The source may have changed while the request was under way.
	want := r.leader
	if want != nil && time.Now().Before(r.badUntil) {
		want = nil
	}
	if t != want {
		b.cut()
		return
	}
	r.streams[b] = struct{}{}
}

func (r *peerRouter) untrack(b *routedBody) {
	r.mu.Lock()
	delete(r.streams, b)
	r.mu.Unlock()
}

// run gives up leader streams idle for IdleTimeout, and probes a given-up
// leader after peerRetry; when it answers, the apiserver streams move to it.
func (r *peerRouter) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var membersFrom *peerTarget
	var membersAt time.Time
	onTicks(ctx, r.opts.IdleTimeout/5, func() {
		// Learn the site's wrappers from the leader, to ask them who leads
		// should the Lease become unreadable (members.go).
		if l := r.source(); l != nil && (l != membersFrom || time.Since(membersAt) > membersRefresh) {
			membersFrom, membersAt = l, time.Now()
			go func() {
				actx, cancel := context.WithTimeout(ctx, peerAskTimeout)
				defer cancel()
				if v, err := r.askSite(actx, &peerTarget{addr: l.addr, pin: l.pin, transport: pinnedTransport(l.pin)}); err == nil {
					r.addMembers(ctx, v.Members)
				}
			}()
		}
		r.recheckLeader(ctx, logger)
		r.mu.Lock()
		leader, bad := r.leader, !r.badUntil.IsZero()
		retry := bad && time.Now().After(r.badUntil)
		var idle *routedBody
		for b := range r.streams {
			if b.target != nil && time.Since(time.Unix(0, b.lastRead.Load())) > r.opts.IdleTimeout {
				idle = b
				break
			}
		}
		r.mu.Unlock()
		if idle != nil {
			r.giveUp(logger, idle.target, fmt.Sprintf("nothing heard for %s", r.opts.IdleTimeout))
			return
		}
		if retry && leader != nil {
			if err := r.probe(ctx, leader); err != nil {
				r.giveUp(logger, leader, "probe: "+err.Error())
				return
			}
			r.mu.Lock()
			if r.leader == leader {
				r.badUntil = time.Time{}
				r.notifyLocked()
				r.cutLocked(func(b *routedBody) bool { return b.target == nil })
			}
			r.mu.Unlock()
			logger.Info("Site stream leader answers again", "leader", leader.node)
		}
	})
}

func (r *peerRouter) probe(ctx context.Context, t *peerTarget) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.IdleTimeout)
	defer cancel()
	resp, err := r.peerGet(ctx, t, "/readyz")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// peerGet GETs path from a peer as this wrapper; any answer but 200 is an
// error.
func (r *peerRouter) peerGet(ctx context.Context, t *peerTarget, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+t.addr+path, nil)
	if err != nil {
		return nil, err
	}
	return r.sendAsPeer(req, t, "peer")
}

// sendAsPeer sends req to t as this wrapper: its peer token, site and
// identity. Any answer but 200 is an error saying who (leader, peer) gave it.
func (r *peerRouter) sendAsPeer(req *http.Request, t *peerTarget, who string) (*http.Response, error) {
	token, err := r.opts.Token()
	if err != nil {
		return nil, fmt.Errorf("peer token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	site, _ := r.site.Load().(string)
	req.Header.Set(siteHeader, site)
	req.Header.Set(peerHeader, r.self)
	resp, err := t.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("%s answered %s", who, resp.Status)
	}
	return resp, nil
}

// routedBody is a watch's response body. Ended by the router, it reads as
// a clean end of stream: the reflector re-watches from its version. A
// leader's stream that fails or ends by itself reads the same way (see
// leaderStreamEnded).
type routedBody struct {
	io.ReadCloser
	target   *peerTarget // nil: upstream
	router   *peerRouter
	started  time.Time
	lastRead atomic.Int64
	ended    atomic.Bool
}

func (b *routedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.lastRead.Store(time.Now().UnixNano())
	}
	if err != nil && b.ended.Load() {
		return n, io.EOF
	}
	if err != nil && b.target != nil {
		return n, b.leaderStreamEnded(err)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, b.upstreamStreamEnded(err)
	}
	return n, err
}

// upstreamStreamEnded does for a stream from the apiserver what
// leaderStreamEnded does for a leader's: a stream that broke (the cloud
// link cut, or lost and found dead by HTTP/2's health check) reads as a
// clean end, so the reflector resumes from its version, where the
// apiserver still holds it, instead of listing everything again. The
// resumed watch is held until a source answers (holdUnanswered); a
// version the apiserver no longer holds gets its 410 and the relist that
// follows it.
func (b *routedBody) upstreamStreamEnded(err error) error {
	klog.Background().V(2).Info("Site stream: a stream from the apiserver broke; resuming it from its version", "err", err)
	return b.endCleanly()
}

// leaderStreamEnded turns the end of a leader's stream that the router did
// not cause into a clean end the reflector resumes from its version. Any
// read error but EOF (the leader reset the stream, as it does when its
// write to a follower that stopped hearing it times out, or the connection
// broke) would reach the reflector as an ERROR event, and a stream that
// ends within a second with no event as a "very short watch": both make it
// relist, here from the apiserver while the leader is given up. A failed
// stream gives the leader up, so the watch resumes from the apiserver.
func (b *routedBody) leaderStreamEnded(err error) error {
	if !errors.Is(err, io.EOF) {
		b.router.giveUp(klog.Background(), b.target, "watch stream: "+err.Error())
	}
	return b.endCleanly()
}

// endCleanly ends the stream as EOF, once it is old enough for the
// reflector to resume it rather than relist.
func (b *routedBody) endCleanly() error {
	if wait := shortestWatch - time.Since(b.started); wait > 0 {
		time.Sleep(wait)
	}
	return io.EOF
}

// shortestWatch is how long a watch must have lasted for client-go's
// reflector to resume it from its version when it ends without an event;
// an even shorter one makes it relist ("very short watch").
const shortestWatch = 1100 * time.Millisecond

// cut ends the stream, once it is old enough to be resumed rather than
// relisted (a leader's first BOOKMARK, sent at once, also counts as an
// event; an apiserver stream may not have had one).
func (b *routedBody) cut() {
	if wait := shortestWatch - time.Since(b.started); wait > 0 {
		time.AfterFunc(wait, b.cut)
		return
	}
	b.ended.Store(true)
	_ = b.ReadCloser.Close()
}

func (b *routedBody) Close() error {
	b.router.untrack(b)
	b.ended.Store(true) // a read it interrupts is no failure of the leader
	return b.ReadCloser.Close()
}

// pinnedTransport trusts exactly the certificate whose SHA-256 is pin.
func pinnedTransport(pin string) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout: 3 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS13,
			// Verified below against the pin instead of a CA: the
			// Lease, written through the apiserver, vouches for it.
			InsecureSkipVerify: true,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if len(raw) == 0 {
					return errors.New("no certificate")
				}
				sum := sha256.Sum256(raw[0])
				if hex.EncodeToString(sum[:]) != pin {
					return errors.New("the peer's certificate is not the one the site's Lease names")
				}
				return nil
			},
		},
	}
}
