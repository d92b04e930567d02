package wrapper_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
	"github.com/servicegroup/servicegroup/wrapper/sitestream"
)

const (
	siteLabel   = "example.com/site"
	peerAccount = "application-grid-wrapper"
	peerNS      = "kube-system"
)

// cloudLink stands for one wrapper's link to the control plane: it counts
// what crosses it and can be cut (requests fail at once and open streams
// end, as when the link drops).
type cloudLink struct {
	*cutLink               // the response bodies open over it
	bytes     atomic.Int64 // response bytes of every request
	unitBytes atomic.Int64 // of Services and EndpointSlices lists and watches
	unitLists atomic.Int64 // full lists of them: LIST, or a watch that sends the initial state
	mu        sync.Mutex
	lists     []string // when and what each full list asked, for failures
	// expired counts the 410 Expired ("too old resource version") the
	// apiserver answered a resumed watch of them with: the one reason a
	// follower may relist from the cloud.
	expired atomic.Int64
	// wire counts the link's bytes below TLS when the link was made with
	// its own transport (siteOptions.countWire); nil otherwise.
	wire *wireCounter
	// byRead counts response bytes, and sent counts requests, by what was
	// read (readKind), for a benchmark's breakdown of what a link pays for.
	byRead, sent sync.Map // string -> *atomic.Int64
	// unitRequests counts the lists and watches of Services and
	// EndpointSlices sent over the link.
	unitRequests atomic.Int64
	// leaseDelay holds every write of a Lease (create, update) this long
	// before it goes on, as a slow apiserver would (its queues); leaseWrites
	// counts those answered 2xx while a delay was set.
	leaseDelay  atomic.Int64 // nanoseconds
	leaseWrites atomic.Int64
	// leaseTimes: every Lease write's count, total and longest time
	// (sent to answered, the delay included), in nanoseconds.
	leaseN, leaseTotal, leaseMax atomic.Int64
}

// leaseWrite reports whether req writes a Lease.
func leaseWrite(req *http.Request) bool {
	return (req.Method == http.MethodPut || req.Method == http.MethodPost) && strings.HasPrefix(req.URL.Path, "/apis/coordination.k8s.io/") && strings.Contains(req.URL.Path, "/leases")
}

// readKind names a request by method, path (a Node's name as {name}) and
// how it reads: a watch, the metadata of objects, a selector.
func readKind(req *http.Request) string {
	path := req.URL.Path
	if rest, ok := strings.CutPrefix(path, "/api/v1/nodes/"); ok && !strings.Contains(rest, "/") {
		path = "/api/v1/nodes/{name}"
	}
	q := req.URL.Query()
	k := req.Method + " " + path
	if q.Get("watch") != "" {
		k += " watch"
	}
	if strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata") {
		k += " metadata"
	}
	if q.Get("labelSelector") != "" {
		k += " labelSelector"
	}
	if q.Get("fieldSelector") != "" {
		k += " fieldSelector"
	}
	return k
}

// readBytes adds n response bytes to kind.
func (l *cloudLink) readBytes(kind string, n int) { addTo(&l.byRead, kind, n) }

func addTo(m *sync.Map, kind string, n int) {
	c, ok := m.Load(kind)
	if !ok {
		c, _ = m.LoadOrStore(kind, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(int64(n))
}

// readTotals returns the response bytes by kind summed over links.
func readTotals(links []*cloudLink) map[string]int64 {
	return totals(links, func(l *cloudLink) *sync.Map { return &l.byRead })
}

// sentTotals returns the requests by kind summed over links.
func sentTotals(links []*cloudLink) map[string]int64 {
	return totals(links, func(l *cloudLink) *sync.Map { return &l.sent })
}

func totals(links []*cloudLink, of func(*cloudLink) *sync.Map) map[string]int64 {
	out := map[string]int64{}
	for _, l := range links {
		of(l).Range(func(k, v any) bool {
			out[k.(string)] += v.(*atomic.Int64).Load()
			return true
		})
	}
	return out
}

func newCloudLink() *cloudLink { return &cloudLink{cutLink: newCutLink()} }

func (l *cloudLink) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		delayed, writing := false, leaseWrite(req)
		if writing {
			defer func(at time.Time) {
				d := int64(time.Since(at))
				l.leaseN.Add(1)
				l.leaseTotal.Add(d)
				for m := l.leaseMax.Load(); d > m && !l.leaseMax.CompareAndSwap(m, d); m = l.leaseMax.Load() {
				}
			}(time.Now())
		}
		if d := time.Duration(l.leaseDelay.Load()); d > 0 && writing {
			select {
			case <-req.Context().Done():
				return nil, req.Context().Err()
			case <-time.After(d):
			}
			delayed = true
		}
		if l.isCut() {
			return nil, errNoRoute("tcp")
		}
		resource := ""
		switch req.URL.Path {
		case "/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices":
			resource = req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
			l.unitRequests.Add(1)
			q := req.URL.Query()
			if q.Get("watch") == "" || q.Get("sendInitialEvents") == "true" {
				l.unitLists.Add(1)
				l.mu.Lock()
				l.lists = append(l.lists, time.Now().Format("15:04:05.000")+" "+req.URL.RequestURI())
				l.mu.Unlock()
			}
		}
		kind := readKind(req)
		addTo(&l.sent, kind, 1)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if delayed && resp.StatusCode/100 == 2 {
			l.leaseWrites.Add(1)
		}
		b := &meteredBody{ReadCloser: resp.Body, link: l, unit: resource != "", resource: resource, gzipped: resp.Uncompressed, kind: kind}
		resp.Body = b
		if !l.opened(b) {
			return nil, errNoRoute("tcp")
		}
		return resp, nil
	})
}

// openUnitStreams returns how many unit-wide streams are open over the link.
func (l *cloudLink) openUnitStreams() int {
	n := 0
	l.each(func(c io.Closer) {
		if b, ok := c.(*meteredBody); ok && b.unit {
			n++
		}
	})
	return n
}

// openUnitStreamsGzipped returns how many of the open unit-wide streams the
// apiserver compresses.
func (l *cloudLink) openUnitStreamsGzipped() int {
	n := 0
	l.each(func(c io.Closer) {
		if b, ok := c.(*meteredBody); ok && b.unit && b.gzipped {
			n++
		}
	})
	return n
}

// openStreamsOf returns how many streams of resource ("services",
// "endpointslices") are open over the link.
func (l *cloudLink) openStreamsOf(resource string) int {
	n := 0
	l.each(func(c io.Closer) {
		if b, ok := c.(*meteredBody); ok && b.resource == resource {
			n++
		}
	})
	return n
}

type meteredBody struct {
	io.ReadCloser
	link     *cloudLink
	unit     bool
	resource string // "services", "endpointslices" or "" for the rest
	gzipped  bool   // the apiserver sent it gzip-compressed (resp.Uncompressed)
	kind     string // readKind of its request
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.link.bytes.Add(int64(n))
	if n > 0 {
		b.link.readBytes(b.kind, n)
	}
	if b.unit {
		b.link.unitBytes.Add(int64(n))
		if bytes.Contains(p[:n], []byte("too old resource version")) {
			b.link.expired.Add(1)
		}
	}
	return n, err
}

func (b *meteredBody) Close() error {
	b.link.closed(b)
	return b.ReadCloser.Close()
}

// siteLAN is one wrapper's peer port on the site network: it can refuse
// (closed port, reset connections) or black-hole (nothing answered, as
// when packets are dropped) until healed.
type siteLAN struct {
	addr    string
	handler http.Handler
	tls     *tls.Config

	accepted atomic.Int64 // connections from peers

	mu   sync.Mutex
	srv  *http.Server
	held chan struct{} // closed when a black hole heals
	// watching counts the open watches of each peer (its node) by
	// resource ("node1 services").
	watching openCount
}

// peerWatches returns how many watches of resource node has open here.
func (s *siteLAN) peerWatches(node, resource string) int {
	return s.watching.of(node + " " + resource)
}

// countWatches wraps the peer handler to count its open watches by peer.
func (s *siteLAN) countWatches(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Query().Get("watch") != "true" {
			h.ServeHTTP(w, req)
			return
		}
		node, _, _ := strings.Cut(req.Header.Get("X-Application-Grid-Wrapper-Peer"), "@")
		s.watching.serve(node+" "+req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:], h, w, req)
	})
}

func (s *siteLAN) serve(t testing.TB) {
	t.Helper()
	ln := listenAgain(t, s.addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv = &http.Server{Handler: s.countWatches(s.handler), TLSConfig: s.tls.Clone(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.ServeTLS(&lanListener{Listener: ln, lan: s}, "", "") }()
}

// refuse closes the port and every connection (the process is gone).
func (s *siteLAN) refuse() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// blackHole stops every byte both ways until heal.
func (s *siteLAN) blackHole() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = make(chan struct{})
	}
}

func (s *siteLAN) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil {
		close(s.held)
		s.held = nil
	}
}

func (s *siteLAN) hold() {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if held != nil {
		<-held
	}
}

type lanListener struct {
	net.Listener
	lan *siteLAN
}

func (l *lanListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.lan.accepted.Add(1)
	return &lanConn{Conn: c, lan: l.lan}, nil
}

type lanConn struct {
	net.Conn
	lan *siteLAN
}

func (c *lanConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.lan.hold()
	return n, err
}

func (c *lanConn) Write(p []byte) (int, error) {
	c.lan.hold()
	return c.Conn.Write(p)
}

// siteWrapper is a wrapper of the site with its cloud link and peer port.
type siteWrapper struct {
	*runningWrapper
	node     string
	cloud    *cloudLink
	lan      *siteLAN
	proxy    *proxyView
	stateDir string
}

type siteOptions struct {
	group string // "" reads the site label
	// token is the peer token; nil: the token of the node's wrapper Pod
	// (podPeerToken), as a projected volume gives it.
	token func() (string, error)
	// stateDir keeps the snapshot; addr and peerAddr reuse a stopped
	// wrapper's addresses ("" picks new ones); cut starts with the cloud
	// link cut.
	stateDir, addr, peerAddr string
	cut                      bool
	// countWire gives the wrapper's cloud link a transport of its own
	// whose connections count the bytes on the wire (cloudLink.wire).
	countWire bool
	// defaultTimings leaves the lease and idle timings at sitestream's
	// defaults (15 s lease, 2 s retry), as shipped, instead of the tests'
	// short ones (BenchmarkAPIServerPerClient: the apiserver's load).
	defaultTimings bool
	// oldRenewRule: a leader serves only within 5 s of its last Lease
	// write answered, the rule before issue 46 (side by side).
	oldRenewRule bool
}

func startSiteWrapper(t testing.TB, cp *controlplane.ControlPlane, node string, ip int, so siteOptions) *siteWrapper {
	t.Helper()
	addr := so.peerAddr
	if addr == "" {
		// A free port on this wrapper's own loopback address.
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", ip))
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	if so.token == nil {
		so.token = podPeerToken(t, cp, peerAccount, node, sitestream.PeerAudience)
	}
	link := newCloudLink()
	link.setCut(so.cut)
	up := rest.CopyConfig(cp.Config)
	if so.countWire {
		link.wire = newWireCounter()
		up = link.wire.wrap(t, up)
	}
	up.Wrap(link.wrap)
	site := &sitestream.Options{
		GroupLabel: siteLabel, Group: so.group, Namespace: peerNS,
		AdvertiseAddress: addr, Token: so.token,
		AllowedUsers:  []string{"system:serviceaccount:" + peerNS + ":" + peerAccount},
		LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second,
		IdleTimeout: 3 * time.Second,
	}
	if so.defaultTimings {
		site.LeaseDuration, site.RenewDeadline, site.RetryPeriod, site.IdleTimeout = 0, 0, 0, 0
	}
	site.ServeOnlyRightAfterRenewal = so.oldRenewRule
	w := startWrapper(t, cp, node, so.addr, wrapper.Options{
		Upstream: up,
		StateDir: so.stateDir, SnapshotInterval: 100 * time.Millisecond,
		SiteStream: site,
	})
	sw := &siteWrapper{runningWrapper: w, node: node, cloud: link, stateDir: so.stateDir,
		lan: &siteLAN{addr: addr, handler: w.srv.PeerHandler(), tls: w.srv.PeerTLSConfig()}}
	sw.lan.serve(t)
	t.Cleanup(func() { sw.lan.heal(); sw.lan.refuse() })
	return sw
}

// kill ends the wrapper as a crash does: its cloud link and peer port go
// first, so it releases nothing.
func (w *siteWrapper) kill() {
	w.cloud.setCut(true)
	w.lan.refuse()
	w.Stop()
}

// peerToken is a token of the wrappers' ServiceAccount for audience aud.
func peerToken(t testing.TB, c kubernetes.Interface, account string, aud ...string) func() (string, error) {
	t.Helper()
	expiry := int64(3600)
	tr, err := c.CoreV1().ServiceAccounts(peerNS).CreateToken(t.Context(), account, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: aud, ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := tr.Status.Token
	return func() (string, error) { return tok, nil }
}

// podPeerToken is the token the wrapper Pod of node presents (account's,
// for audience aud): bound to a Pod on node, so that the apiserver's review
// of it names the node (sitestream.NodeNameExtra), as a projected
// serviceAccountToken volume's does.
func podPeerToken(t testing.TB, cp *controlplane.ControlPlane, account, node string, aud ...string) func() (string, error) {
	t.Helper()
	tok, err := cp.PodToken(t.Context(), peerNS, account, node, aud...)
	if err != nil {
		t.Fatal(err)
	}
	return func() (string, error) { return tok, nil }
}

// proxyView is what kube-proxy reads through one wrapper: its Services and
// EndpointSlice informers (kube-proxy's selector) and its Node; it records
// DELETED slices and how late each heartbeat arrived.
type proxyView struct {
	slices, services, node cache.SharedIndexInformer
	mu                     sync.Mutex
	deleted                []string
	beats                  *heartbeat
	worstLag               time.Duration
}

func watchAsKubeProxy(t testing.TB, w *runningWrapper, node string, beats *heartbeat) *proxyView {
	t.Helper()
	c := clientFor(t, w.URL(), protobuf)
	sel := "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	nf := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + node }))
	v := &proxyView{slices: f.Discovery().V1().EndpointSlices().Informer(), services: f.Core().V1().Services().Informer(),
		node: nf.Core().V1().Nodes().Informer(), beats: beats}
	_, _ = v.slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { v.sawBeat(obj.(*discoveryv1.EndpointSlice)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			s := obj.(*discoveryv1.EndpointSlice)
			v.mu.Lock()
			v.deleted = append(v.deleted, s.Namespace+"/"+s.Name)
			v.mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.Shutdown(); nf.Shutdown() })
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	if !cache.WaitForCacheSync(t.Context().Done(), v.slices.HasSynced, v.services.HasSynced, v.node.HasSynced) {
		t.Fatal("kube-proxy's informers did not sync")
	}
	return v
}

func (v *proxyView) sawBeat(s *discoveryv1.EndpointSlice) {
	if v.beats == nil || s.Name != beatSlice {
		return
	}
	n, err := strconv.Atoi(s.Annotations[beatAnnotation])
	if err != nil {
		return
	}
	lag := v.beats.lagOf(n)
	v.mu.Lock()
	v.worstLag = max(v.worstLag, lag)
	v.mu.Unlock()
}

// takeWorstLag returns the longest delay of a heartbeat since the last call.
func (v *proxyView) takeWorstLag() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	l := v.worstLag
	v.worstLag = 0
	return l
}

func (v *proxyView) deletedSlices() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.deleted...)
}

const (
	beatSlice      = "heartbeat"
	beatAnnotation = "example.com/beat"
)

// heartbeat changes one EndpointSlice every period, remembering when each
// change was written, so every view can tell how late it saw it: the
// longest of these is the longest gap a kube-proxy lived through.
type heartbeat struct {
	mu      sync.Mutex
	written map[int]time.Time
	seen    map[int]bool
}

func (h *heartbeat) lagOf(n int) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.written[n]
	if !ok {
		return 0
	}
	return time.Since(at)
}

func startHeartbeat(t *testing.T, c kubernetes.Interface, ns string, period time.Duration) *heartbeat {
	h := &heartbeat{written: map[int]time.Time{}}
	createService(t, c, ns, beatSlice, "")
	createSlice(t, c, ns, beatSlice, beatSlice, endpoint("10.1.0.1", "node0"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			h.mu.Lock()
			h.written[n] = time.Now()
			h.mu.Unlock()
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, beatAnnotation, n)
			_, _ = c.DiscoveryV1().EndpointSlices(ns).Patch(ctx, beatSlice, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
	}()
	return h
}

// holder returns the node holding the site's Lease ("" for none).
func holder(ctx context.Context, c kubernetes.Interface, group string) (string, error) {
	l, err := c.CoordinationV1().Leases(peerNS).Get(ctx, "application-grid-wrapper-site-"+group, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	node, _, _ := strings.Cut(*l.Spec.HolderIdentity, "@")
	return node, nil
}

// TestSiteStream runs three wrappers of one site against a real control
// plane, each with kube-proxy's informers behind it and a cloud link the
// test meters and cuts, through: the leader killed, cut from the cloud
// only, cut from the site only (packets dropped), two leaders at once, and
// the whole site cut off (one wrapper restarted from its snapshot meanwhile).
// After each, one wrapper alone holds the cloud streams, every kube-proxy
// view equals the apiserver's truth, none saw a DELETED slice, and the
// followers pulled no full list from the cloud. The longest delay of a
// change written every 250ms is logged per scenario.
func TestSiteStream(t *testing.T) {
	cp, admin := startTestCluster(t, "")
	nodes := []string{"node0", "node1", "node2"}
	for _, n := range nodes {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"shop"}}}`, siteLabel)
		if _, err := admin.CoreV1().Nodes().Patch(t.Context(), n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sa := range []string{peerAccount, "someone-else"} {
		if _, err := admin.CoreV1().ServiceAccounts(peerNS).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Each wrapper presents its own node's Pod's token (startSiteWrapper).
	const ns = "site"
	createNamespace(t, admin, ns)
	createNamespace(t, admin, "beat")
	beats := startHeartbeat(t, admin, "beat", 250*time.Millisecond)
	createService(t, admin, ns, "web", `["zone1"]`)
	createSlice(t, admin, ns, "web", "web-a", endpoint("10.0.0.1", "node0"), endpoint("10.0.0.2", "node1"), endpoint("10.0.0.3", "node2"))

	ws := map[string]*siteWrapper{}
	start := func(i int, node string) {
		w := startSiteWrapper(t, cp, node, 10+i, siteOptions{})
		w.proxy = watchAsKubeProxy(t, w.runningWrapper, node, beats)
		ws[node] = w
	}
	for i, n := range nodes {
		start(i, n)
	}
	created := 0
	change := func() {
		created++
		createSlice(t, admin, ns, "web", fmt.Sprintf("web-%d", created), endpoint(fmt.Sprintf("10.0.1.%d", created), nodes[created%3]))
	}
	// settle waits until live (not excluded) wrappers have one leader that
	// alone streams from the cloud and every view is the truth, with a
	// watch of each resource open at its source: an informer that is
	// still backing off after a cut (client-go retries a failed relist
	// after 0.8s, doubling to 30s) would otherwise relist in the next
	// scenario, from whatever source it has then.
	settle := func(t *testing.T, what string, exclude ...string) string {
		t.Helper()
		var lead string
		eventually(t, what, 2*time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			if lead, err = holder(ctx, admin, "shop"); err != nil {
				return false, err
			}
			if ws[lead] == nil || slicesContain(exclude, lead) {
				return false, fmt.Errorf("holder %q is not a live wrapper", lead)
			}
			cl, err := readCluster(ctx, admin, ns)
			if err != nil {
				return false, err
			}
			for _, n := range nodes {
				w := ws[n]
				if slicesContain(exclude, n) {
					continue
				}
				if streams := w.cloud.openUnitStreams(); (n == lead) != (streams > 0) {
					return false, fmt.Errorf("%s (leader %s) has %d cloud streams of Services and EndpointSlices", n, lead, streams)
				}
				for _, r := range []string{"services", "endpointslices"} {
					if n == lead && w.cloud.openStreamsOf(r) == 0 {
						return false, fmt.Errorf("the leader %s watches no %s from the cloud", n, r)
					}
					if n != lead && ws[lead].lan.peerWatches(n, r) == 0 {
						return false, fmt.Errorf("%s watches no %s from its leader %s", n, r, lead)
					}
				}
				if err := diffServed(w.proxy.slices.GetStore(), ns, cl.wantSlices(n)); err != nil {
					return false, fmt.Errorf("%s: EndpointSlice %w", n, err)
				}
			}
			return true, nil
		})
		return lead
	}
	type counts struct{ lists, expired int64 }
	cloudLists := func() map[string]counts {
		m := map[string]counts{}
		for n, w := range ws {
			m[n] = counts{w.cloud.unitLists.Load(), w.cloud.expired.Load()}
		}
		return m
	}
	// noRelists: followers other than skip pulled no full list from the
	// cloud since before, but after the apiserver answered 410 Expired
	// (its watch cache no longer held their version of a quiet resource:
	// what a direct kube-proxy would have done too).
	noRelists := func(t *testing.T, before map[string]counts, skip ...string) {
		t.Helper()
		for n, w := range ws {
			if slicesContain(skip, n) {
				continue
			}
			lists, expired := w.cloud.unitLists.Load()-before[n].lists, w.cloud.expired.Load()-before[n].expired
			if lists > expired {
				w.cloud.mu.Lock()
				t.Errorf("%s pulled %d full lists of Services or EndpointSlices from the cloud after %d 410s: %v", n, lists, expired, w.cloud.lists[before[n].lists:])
				w.cloud.mu.Unlock()
			} else if lists > 0 {
				t.Logf("%s relisted from the cloud %d times, each after a 410 Expired from the apiserver", n, lists)
			}
		}
	}
	report := func(t *testing.T, scenario string) {
		t.Helper()
		for _, n := range nodes {
			if d := ws[n].proxy.deletedSlices(); len(d) > 0 {
				t.Errorf("%s: kube-proxy behind %s saw slices DELETED that exist: %v", scenario, n, d)
			}
			t.Logf("%s: longest delay of a change seen by kube-proxy behind %s: %s", scenario, n, ws[n].proxy.takeWorstLag().Round(10*time.Millisecond))
		}
	}

	lead := settle(t, "a leader streams for the site")
	for _, n := range nodes {
		ws[n].proxy.takeWorstLag()
	}

	// A node of another site, with a wrapper Pod of its own.
	away := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-away", Labels: map[string]string{gridKey: "nodeunit-away", siteLabel: "away"}}}
	if _, err := admin.CoreV1().Nodes().Create(t.Context(), away, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("peers authenticate", func(t *testing.T) {
		follower := nodes[(slicesIndex(nodes, lead)+1)%len(nodes)]
		token := podPeerToken(t, cp, peerAccount, follower, sitestream.PeerAudience)
		awayToken := podPeerToken(t, cp, peerAccount, "node-away", sitestream.PeerAudience)
		pin := strings.Repeat("ab", 32)
		url := "https://" + ws[lead].lan.addr + "/api/v1/services?labelSelector=" + strings.ReplaceAll("!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless", "!", "%21")
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
		get := func(url, site, peer string, tok func() (string, error)) (int, []byte) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			req.Header.Set("X-Application-Grid-Wrapper-Site", site)
			if peer != "" {
				req.Header.Set("X-Application-Grid-Wrapper-Peer", peer)
			}
			if tok != nil {
				s, _ := tok()
				req.Header.Set("Authorization", "Bearer "+s)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, body
		}
		siteURL := "https://" + ws[lead].lan.addr + "/site"
		for _, tc := range []struct {
			name, url, site, peer string
			tok                   func() (string, error)
			want                  int
		}{
			{"no token", url, "shop", "", nil, http.StatusUnauthorized},
			{"a token for the apiserver", url, "shop", "", podPeerToken(t, cp, peerAccount, follower), http.StatusUnauthorized},
			{"another account", url, "shop", "", podPeerToken(t, cp, "someone-else", follower, sitestream.PeerAudience), http.StatusForbidden},
			{"outside kube-proxy's selection", "https://" + ws[lead].lan.addr + "/api/v1/services", "shop", "", token, http.StatusForbidden},
			{"a Secret", "https://" + ws[lead].lan.addr + "/api/v1/secrets", "shop", "", token, http.StatusForbidden},
			{"a wrapper of another site", url, "elsewhere", "", token, http.StatusTooManyRequests},
			{"a token bound to no Pod", url, "shop", "", peerToken(t, admin, peerAccount, sitestream.PeerAudience), http.StatusForbidden},
			{"a node of another site naming this one", url, "shop", "", awayToken, http.StatusForbidden},
			{"a node of another site naming this one, its members", siteURL, "shop", "", awayToken, http.StatusForbidden},
			{"a member of another node", siteURL, "shop", "node-away@127.0.0.99:1#" + pin, token, http.StatusForbidden},
			{"a member of another node of the site", siteURL, "shop", lead + "@127.0.0.99:1#" + pin, token, http.StatusForbidden},
			{"a wrapper of the site", url, "shop", "", token, http.StatusOK},
			{"a wrapper of the site, as itself", url, "shop", follower + "@127.0.0.98:1#" + pin, token, http.StatusOK},
		} {
			if got, body := get(tc.url, tc.site, tc.peer, tc.tok); got != tc.want {
				t.Errorf("%s: %d, want %d: %s", tc.name, got, tc.want, body)
			}
		}
		// The attack: one peer token and a member header of a node
		// outside the site. The leader's members, and, after a follower's
		// next read of them (every 10 s), that follower's, are only nodes
		// of the site.
		members := func(addr string) []string {
			t.Helper()
			code, body := get("https://"+addr+"/site", "shop", "", token)
			if code != http.StatusOK {
				t.Fatalf("/site of %s: %d %s", addr, code, body)
			}
			var v struct{ Members []string }
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("/site of %s: %v: %s", addr, err, body)
			}
			return v.Members
		}
		onlySite := func(who string, ms []string) {
			t.Helper()
			for _, m := range ms {
				if node, _, _ := strings.Cut(m, "@"); !slicesContain(nodes, node) {
					t.Errorf("%s lists a member outside the site: %q (all: %v)", who, m, ms)
				}
			}
		}
		onlySite("the leader "+lead, members(ws[lead].lan.addr))
		time.Sleep(12 * time.Second)
		for _, n := range nodes {
			if n != lead {
				onlySite("the follower "+n, members(ws[n].lan.addr))
			}
		}
	})

	t.Run("leader killed", func(t *testing.T) {
		before := cloudLists()
		old := lead
		ws[old].kill()
		change()
		lead = settle(t, "a new leader after the kill", old)
		noRelists(t, before, old)
		report(t, "leader killed")
		start(slicesIndex(nodes, old), old)
		lead = settle(t, "the killed wrapper back as a follower")
	})

	t.Run("leader cut from the cloud", func(t *testing.T) {
		before := cloudLists()
		old := lead
		failed := ws[old].srv.SiteStreamFailedRequests()
		ws[old].cloud.setCut(true)
		change()
		// The old leader, still cut, learns the next leader from its peers
		// once the Lease has expired and another wrapper took it. From then
		// on it has a source: a change written now reaches its view through
		// the new leader, without waiting for an informer's backoff after
		// the lists and watches the cut failed.
		var known time.Time
		eventually(t, old+" reads from the next leader", 2*time.Minute, func(ctx context.Context) (bool, error) {
			next, err := holder(ctx, admin, "shop")
			if err != nil || next == old || next == "" {
				return false, fmt.Errorf("holder %q: %v", next, err)
			}
			if src := ws[old].srv.SiteStreamSource(); src != next {
				return false, fmt.Errorf("it reads from %q, the Lease names %s", src, next)
			}
			known = time.Now()
			return true, nil
		})
		change()
		cl, err := readCluster(t.Context(), admin, ns)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, old+"'s view has the change made after it knew its new leader", 2*time.Minute, func(context.Context) (bool, error) {
			err := diffServed(ws[old].proxy.slices.GetStore(), ns, cl.wantSlices(old))
			return err == nil, err
		})
		t.Logf("leader cut from the cloud: %s's view was stale for %s after it knew its new leader", old, time.Since(known).Round(10*time.Millisecond))
		lead = settle(t, "a new leader while the old one is cut from the cloud", old)
		noRelists(t, before, old)
		if n := ws[old].srv.SiteStreamFailedRequests() - failed; n != 0 {
			t.Errorf("%d lists or watches of Services or EndpointSlices failed back to %s's informers while it was cut from the cloud, want each held until a source answered (a failed one is tried again only at client-go's next backoff step, the view stale meanwhile)", n, old)
		}
		ws[old].cloud.setCut(false)
		change()
		lead = settle(t, "the old leader back")
		report(t, "leader cut from the cloud")
	})

	t.Run("leader cut from the site", func(t *testing.T) {
		before := cloudLists()
		old := lead
		ws[old].lan.blackHole()
		change()
		// The followers read from the cloud meanwhile: they see the change.
		eventually(t, "the followers read from the cloud", 2*time.Minute, func(ctx context.Context) (bool, error) {
			cl, err := readCluster(ctx, admin, ns)
			if err != nil {
				return false, err
			}
			for _, n := range nodes {
				if n == old {
					continue
				}
				if ws[n].cloud.openUnitStreams() == 0 {
					return false, fmt.Errorf("%s streams nothing from the cloud", n)
				}
				if err := diffServed(ws[n].proxy.slices.GetStore(), ns, cl.wantSlices(n)); err != nil {
					return false, fmt.Errorf("%s: EndpointSlice %w", n, err)
				}
			}
			return true, nil
		})
		ws[old].lan.heal()
		change()
		lead = settle(t, "the followers back on the leader")
		noRelists(t, before)
		report(t, "leader cut from the site")
	})

	t.Run("two leaders", func(t *testing.T) {
		// A fourth wrapper leads a site of its own; the test writes it into
		// this site's Lease while the leader still believes it leads: both
		// serve until the old one fails to renew, then the Lease expires and
		// the site elects again.
		// Its node is one of this site's (the followers follow only those):
		// the wrapper alone believes it is of another.
		n3 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node3", Labels: map[string]string{gridKey: "nodeunit3", siteLabel: "shop"}}}
		if _, err := admin.CoreV1().Nodes().Create(t.Context(), n3, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		other := startSiteWrapper(t, cp, "node3", 20, siteOptions{group: "elsewhere"})
		var otherID string
		eventually(t, "the other site's leader", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := admin.CoordinationV1().Leases(peerNS).Get(ctx, "application-grid-wrapper-site-elsewhere", metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil {
				return false, err
			}
			otherID = *l.Spec.HolderIdentity
			return strings.Contains(otherID, other.lan.addr), nil
		})
		before := cloudLists()
		// The leader renews this Lease every RetryPeriod: a write between the
		// read and the update conflicts, so read again and retry.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l, err := admin.CoordinationV1().Leases(peerNS).Get(t.Context(), "application-grid-wrapper-site-shop", metav1.GetOptions{})
			if err != nil {
				return err
			}
			now := metav1.NowMicro()
			l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &otherID, &now, &now
			_, err = admin.CoordinationV1().Leases(peerNS).Update(t.Context(), l, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		change()
		// The other wrapper leads another site: it refuses this site's
		// followers (429), which stream from the cloud until the site has
		// elected again. Whoever wins that election, only it may then.
		eventually(t, "the other leader asked, the site re-elected, only its leader on the cloud", 2*time.Minute, func(ctx context.Context) (bool, error) {
			cur, err := holder(ctx, admin, "shop")
			if err != nil {
				return false, err
			}
			for _, n := range nodes {
				if ws[n].cloud.openUnitStreams() > 0 && n != cur {
					return false, fmt.Errorf("%s streams from the cloud (holder %q)", n, cur)
				}
			}
			if other.lan.accepted.Load() == 0 {
				return false, errors.New("no follower reached the other leader")
			}
			return true, nil
		})
		change()
		lead = settle(t, "one leader of the site again")
		noRelists(t, before)
		report(t, "two leaders")
	})

	t.Run("a Lease held by a node of another site", func(t *testing.T) {
		// A wrapper token of node-away (site away) can write this site's
		// Lease as itself (the shipped policy lets a node hold a Lease only
		// as itself, whatever the site). The followers must not read from
		// it: they read from the apiserver until the Lease expires and the
		// site elects one of its own.
		other := startSiteWrapper(t, cp, "node-away", 21, siteOptions{})
		var otherID string
		eventually(t, "node-away leads its own site", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := admin.CoordinationV1().Leases(peerNS).Get(ctx, "application-grid-wrapper-site-away", metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil {
				return false, err
			}
			otherID = *l.Spec.HolderIdentity
			return strings.HasPrefix(otherID, "node-away@"), nil
		})
		before := cloudLists()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l, err := admin.CoordinationV1().Leases(peerNS).Get(t.Context(), "application-grid-wrapper-site-shop", metav1.GetOptions{})
			if err != nil {
				return err
			}
			now := metav1.NowMicro()
			l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &otherID, &now, &now
			_, err = admin.CoordinationV1().Leases(peerNS).Update(t.Context(), l, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		change()
		eventually(t, "the site elected one of its own again", 2*time.Minute, func(ctx context.Context) (bool, error) {
			cur, err := holder(ctx, admin, "shop")
			if err != nil {
				return false, err
			}
			return slicesContain(nodes, cur), fmt.Errorf("holder %q", cur)
		})
		change()
		lead = settle(t, "one leader of the site again")
		if n := other.lan.accepted.Load(); n != 0 {
			t.Errorf("the site's wrappers connected %d times to node-away's wrapper, which held their Lease from another site", n)
		}
		noRelists(t, before)
		report(t, "a Lease held by a node of another site")
	})

	outer := t
	t.Run("whole site cut off", func(t *testing.T) {
		// A follower started again with a state directory (the others
		// run without), so it has a snapshot when the site is cut off.
		restart := func(node string, cut bool) *siteWrapper {
			old := ws[node]
			old.lan.refuse()
			old.Stop()
			dir := old.stateDir
			if dir == "" {
				dir = outer.TempDir()
			}
			since := uint64(time.Now().UnixNano()) // at most the new wrapper's first version
			w := startSiteWrapper(outer, cp, node, 0, siteOptions{stateDir: dir,
				addr: old.addr, peerAddr: old.lan.addr, cut: cut})
			w.proxy = old.proxy
			ws[node] = w
			if !cut {
				// Before anything else happens, kube-proxy's informers
				// are back (after a relist: the old wrapper had no
				// snapshot) and hold the new wrapper's versions. Under
				// load they can still be backing off when the next step
				// starts; their next request then lands on whatever
				// wrapper runs then, with the old wrapper's versions.
				eventually(t, "kube-proxy's informers watch "+node+"'s new wrapper, at its versions", 2*time.Minute, func(context.Context) (bool, error) {
					for r, inf := range map[string]cache.SharedIndexInformer{"services": w.proxy.services, "endpointslices": w.proxy.slices, "nodes": w.proxy.node} {
						rv, _ := strconv.ParseUint(inf.LastSyncResourceVersion(), 10, 64)
						if got := w.openWatches(r); got != 1 || rv < since {
							return false, fmt.Errorf("%s: %d watches open, resourceVersion %d (the new wrapper's start at least %d)", r, got, rv, since)
						}
					}
					return true, nil
				})
			}
			return w
		}
		restarted := nodes[(slicesIndex(nodes, lead)+1)%len(nodes)]
		restart(restarted, false)
		lead = settle(t, "the follower back with a state directory")

		before := cloudLists()
		want, err := readCluster(t.Context(), admin, ns)
		if err != nil {
			t.Fatal(err)
		}
		services := map[string]int{}
		for _, n := range nodes {
			services[n] = len(ws[n].proxy.services.GetStore().List())
			ws[n].cloud.setCut(true)
		}
		// The leader stops serving once it has not renewed for
		// RenewDeadline, before its Lease expires.
		eventually(t, "the site's Lease expires", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := admin.CoordinationV1().Leases(peerNS).Get(ctx, "application-grid-wrapper-site-shop", metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
				return false, err
			}
			return time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second, nil
		})
		change() // reaches the site only when the link is back

		// The wrapper restarted while the cloud is away serves its snapshot;
		// kube-proxy's informers resume from it without relisting.
		w := restart(restarted, true)
		if code, body := readyz(t, w.runningWrapper); code != http.StatusOK || !strings.Contains(body, "serving the snapshot written at") {
			t.Fatalf("/readyz of %s restarted while cut off: %d %q", restarted, code, body)
		}
		eventually(t, "kube-proxy's informers watch the restarted wrapper", 2*time.Minute, func(context.Context) (bool, error) {
			for _, r := range []string{"services", "endpointslices", "nodes"} {
				if got := w.openWatches(r); got != 1 {
					return false, fmt.Errorf("%d watches of %s, want 1", got, r)
				}
			}
			return true, nil
		})
		if l := relists(w.requestsSince(0)); len(l) != 0 {
			t.Fatalf("kube-proxy's informers relisted from %s's snapshot: %q; the restarted wrapper's answers: %q", restarted, l, w.answered())
		}
		// Every kube-proxy keeps its full view from before the cut.
		for _, n := range nodes {
			if err := diffServed(ws[n].proxy.slices.GetStore(), ns, want.wantSlices(n)); err != nil {
				t.Errorf("%s while the site is cut off: EndpointSlice %v", n, err)
			}
			if got := len(ws[n].proxy.services.GetStore().List()); got != services[n] {
				t.Errorf("%s while the site is cut off: %d Services, %d before", n, got, services[n])
			}
		}

		for _, n := range nodes {
			ws[n].cloud.setCut(false)
		}
		lead = settle(t, "the site back on one leader, with the change")
		eventually(t, "the restarted wrapper synced upstream", 2*time.Minute, func(context.Context) (bool, error) {
			code, body := readyz(t, w.runningWrapper)
			return code == http.StatusOK && body == "ok", nil
		})
		if l := relists(w.requestsSince(0)); len(l) != 0 {
			t.Errorf("kube-proxy's informers relisted from %s after the link came back: %q", restarted, l)
		}
		// The leader at the cut resumes its watches too: the cut broke its
		// open cloud streams, which its router ends cleanly (client-go's
		// reflector would take the read error for an ERROR event and list
		// everything again), and the resumed watches wait for the cloud.
		// The followers had no cloud stream open; their leader streams end
		// cleanly. Only the restarted wrapper lists (below).
		noRelists(t, before, restarted)
		// atMostOneEach: n pulled at most one full list of Services and one
		// of EndpointSlices from the cloud since from, but after 410s.
		atMostOneEach := func(n string, from counts) {
			l := ws[n].cloud
			l.mu.Lock()
			defer l.mu.Unlock()
			expired := l.expired.Load() - from.expired
			lists := map[bool]int64{} // by whether of EndpointSlices
			for _, u := range l.lists[from.lists:] {
				lists[strings.Contains(u, "/endpointslices")]++
			}
			if lists[false] > 1+expired || lists[true] > 1+expired {
				t.Errorf("%s pulled more than one full list of Services or of EndpointSlices from the cloud after %d 410s: %v", n, expired, l.lists[from.lists:])
			} else {
				t.Logf("%s pulled %d full lists of Services and %d of EndpointSlices from the cloud", n, lists[false], lists[true])
			}
		}
		// The restarted wrapper's informers began with no version (the
		// snapshot's are the wrapper's own, not the apiserver's): each
		// lists once, from the cloud or from its leader.
		atMostOneEach(restarted, counts{})
		report(t, "whole site cut off")
	})
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
