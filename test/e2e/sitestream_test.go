package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testenv"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
	"github.com/servicegroup/servicegroup/wrapper/sitestream"
)

// One site of three nodes, each a network namespace on the fabric's bridge
// (the site's LAN) running the real wrapper (with --site-label) and the real
// kube-proxy behind it; the apiserver sits in the root namespace, behind
// each node's own link to it. A link is cut by the kernel: an nftables
// table in the node's namespace drops every packet to and from the cut
// addresses (a black hole, as a failed uplink or switch port is).
const (
	siteLabelKey  = "sitestream.e2e/site"
	siteValue     = "shop"
	sitePeerPort  = "51009"
	siteAccount   = "application-grid-wrapper"
	siteNS        = "kube-system"
	siteSvcNS     = "default"
	siteSvc       = "site-svc"
	siteSlice     = "site-svc-a"
	siteCutTable  = "sgsitecut"
	siteLeaseName = "application-grid-wrapper-site-" + siteValue
)

var siteNodes = []string{"site0", "site1", "site2"}

type siteNode struct {
	fabric  *harness.FabricNode
	wrapper *controlplane.Process
	proxy   *controlplane.Process
}

type siteCluster struct {
	t       *testing.T
	ctx     context.Context
	fabric  *harness.Fabric
	cp      *controlplane.ControlPlane
	client  kubernetes.Interface
	bin     string
	dir     string
	tokenF  map[string]string // node -> its wrapper Pod's peer token file
	kubecfg string
	nodes   map[string]*siteNode

	// The EndpointSlice's one endpoint is 10.9.(k/250).(k%250+1) for write
	// k; written records when each k was written.
	mu      sync.Mutex
	k       int
	written map[int]time.Time
	// seen[node] lists when kube-proxy's rules first showed each k.
	seen map[string]map[int]time.Time
	// lost records a moment kube-proxy's rules had no endpoint at all for
	// the Service (what a spurious DELETE of its slice would leave).
	lost []string
}

func startSite(t *testing.T) *siteCluster {
	t.Helper()
	requireHost(t, harness.ToolIP, harness.ToolIPTables, harness.ToolNFT)
	if !harness.Available(harness.WrapperPkg) {
		testenv.Missing(t, "the wrapper is not in this checkout")
	}
	proxyBin := controlplane.BinaryForTest(t, controlplane.KubeProxy)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancel)
	bins, err := testbin.Paths(ctx, "application-grid-wrapper")
	if err != nil {
		t.Fatal(err)
	}
	f, err := harness.NewFabric(ctx, harness.FabricOptions{Nodes: siteNodes, ServiceCIDR: harness.ServiceCIDR})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		assertTornDown(t, f)
	})
	cp := controlplane.StartForTest(t, controlplane.Options{
		BindAddress: f.RootIP.String(), ExtraSANs: []net.IP{f.RootIP}, ServiceCIDR: harness.ServiceCIDR,
	})
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	sc := &siteCluster{t: t, ctx: ctx, fabric: f, cp: cp, client: client, bin: bins["application-grid-wrapper"], dir: t.TempDir(),
		nodes: map[string]*siteNode{}, written: map[int]time.Time{}, seen: map[string]map[int]time.Time{}}

	// The peers' tokens: the wrappers' ServiceAccount, audience PeerAudience,
	// each bound to a Pod on its node (as a DaemonSet's projected volume
	// gives it: the leader takes the peer's node from it).
	if _, err := client.CoreV1().ServiceAccounts(siteNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: siteAccount}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc.tokenF = map[string]string{}
	cert, key := cp.AdminCertificate()
	if sc.kubecfg, err = cp.WriteKubeconfig("site-wrapper.kubeconfig", cp.URL, cert, key); err != nil {
		t.Fatal(err)
	}
	for _, fn := range f.Nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fn.Name, Labels: map[string]string{siteLabelKey: siteValue, "kubernetes.io/hostname": fn.Name}}}
		created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fn.IP.String()}}
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		sc.nodes[fn.Name] = &siteNode{fabric: fn}
		tok, err := cp.PodToken(ctx, siteNS, siteAccount, fn.Name, sitestream.PeerAudience)
		if err != nil {
			t.Fatal(err)
		}
		sc.tokenF[fn.Name] = filepath.Join(sc.dir, "peer-token-"+fn.Name)
		if err := os.WriteFile(sc.tokenF[fn.Name], []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: siteSvc, Namespace: siteSvcNS},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := client.CoreV1().Services(siteSvcNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: siteSlice, Namespace: siteSvcNS, Labels: map[string]string{
			discoveryv1.LabelServiceName: siteSvc, discoveryv1.LabelManagedBy: "sitestream.e2e"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{sc.endpoint(0)},
	}
	sc.written[0] = time.Now()
	if _, err := client.DiscoveryV1().EndpointSlices(siteSvcNS).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// site0 leads, the others follow it.
	sc.startWrapper("site0")
	sc.waitLeader("site0")
	for _, n := range siteNodes[1:] {
		sc.startWrapper(n)
	}
	for _, n := range siteNodes {
		sc.startKubeProxy(n, proxyBin)
	}
	for _, n := range siteNodes[1:] {
		sc.waitFollows(n, "site0")
	}
	sc.waitRules(siteNodes...)
	observing, stopObserving := context.WithCancel(ctx)
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		sc.observe(observing)
	}()
	t.Cleanup(func() {
		stopObserving()
		<-observed
		sc.logTimeline()
		if t.Failed() {
			for _, n := range siteNodes {
				for _, p := range []*controlplane.Process{sc.nodes[n].wrapper, sc.nodes[n].proxy} {
					if p != nil {
						t.Logf("----- %s -----\n%s", p.Name, p.LogTail(60))
					}
				}
			}
		}
		for _, n := range siteNodes {
			sc.nodes[n].proxy.Stop(5 * time.Second)
			sc.nodes[n].wrapper.Stop(5 * time.Second)
		}
	})
	return sc
}

func (sc *siteCluster) endpoint(k int) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{fmt.Sprintf("10.9.%d.%d", k/250, k%250+1)},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		NodeName:   ptr.To("site0"),
	}
}

func endpointWrite(ip string) (int, bool) {
	var a, b int
	if _, err := fmt.Sscanf(ip, "10.9.%d.%d", &a, &b); err != nil {
		return 0, false
	}
	return a*250 + b - 1, true
}

func (sc *siteCluster) startWrapper(name string) {
	sc.t.Helper()
	n := sc.nodes[name]
	args := []string{
		"--kubeconfig=" + sc.kubecfg, "--node-name=" + name,
		"--insecure-plain-http", "--bind-address=" + harness.WrapperAddr, "--metrics-bind-address=" + harness.WrapperOpsAddr,
		"--site-label=" + siteLabelKey, "--site-lease-namespace=" + siteNS,
		"--peer-bind-address=" + net.JoinHostPort(n.fabric.IP.String(), sitePeerPort),
		"--peer-token-file=" + sc.tokenF[name],
		"--peer-allowed-users=system:serviceaccount:" + siteNS + ":" + siteAccount,
		"--v=2",
	}
	p, err := controlplane.StartProcess("wrapper-"+name, n.fabric.NS.Command(context.WithoutCancel(sc.ctx), sc.bin, args...), sc.dir)
	if err != nil {
		sc.t.Fatal(err)
	}
	n.wrapper = p
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: n.fabric.NS.DialContext}}
	testwait.Eventually(sc.ctx, sc.t, 2*time.Minute, "wrapper /readyz on "+name, func(context.Context) error {
		if done, err := p.Exited(); done {
			sc.t.Fatalf("wrapper on %s exited: %v\n%s", name, err, p.LogTail(40))
		}
		return controlplane.HTTPOK(client, "http://"+harness.WrapperOpsAddr+"/readyz")
	})
}

func (sc *siteCluster) startKubeProxy(name, bin string) {
	sc.t.Helper()
	n := sc.nodes[name]
	kubeconfig := filepath.Join(sc.dir, "kube-proxy-"+name+".kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: wrapper, cluster: {server: "http://`+harness.WrapperAddr+`"}}]
users: [{name: kube-proxy, user: {}}]
contexts: [{name: wrapper, context: {cluster: wrapper, user: kube-proxy}}]
current-context: wrapper
`), 0o600); err != nil {
		sc.t.Fatal(err)
	}
	p, err := controlplane.StartProcess("kube-proxy-"+name, n.fabric.NS.Command(context.WithoutCancel(sc.ctx), bin,
		"--kubeconfig="+kubeconfig, "--hostname-override="+name, "--proxy-mode=iptables",
		"--cluster-cidr="+harness.ClusterCIDR,
		"--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=127.0.0.1:10249",
		"--conntrack-max-per-core=0", "--conntrack-min=0",
		"--conntrack-tcp-timeout-established=0s", "--conntrack-tcp-timeout-close-wait=0s", "--v=2"), sc.dir)
	if err != nil {
		sc.t.Fatal(err)
	}
	n.proxy = p
}

// proxyEndpoints reads kube-proxy's DNAT targets for the Service on node.
func (sc *siteCluster) proxyEndpoints(ctx context.Context, name string) ([]string, error) {
	n := sc.nodes[name]
	if done, err := n.proxy.Exited(); done {
		sc.t.Errorf("kube-proxy on %s exited: %v\n%s", name, err, n.proxy.LogTail(40))
		return nil, fmt.Errorf("kube-proxy on %s exited", name)
	}
	out, err := n.fabric.NS.Run(ctx, "iptables-save", "-t", "nat")
	if err != nil {
		return nil, err
	}
	return harness.ProxyEndpoints(harness.ProxyModeIPTables, out, siteSvcNS, siteSvc), nil
}

// waitRules waits until kube-proxy's rules on every named node hold exactly
// the endpoint last written.
func (sc *siteCluster) waitRules(names ...string) {
	sc.t.Helper()
	sc.mu.Lock()
	want := sc.endpoint(sc.k).Addresses
	sc.mu.Unlock()
	for _, n := range names {
		testwait.Eventually(sc.ctx, sc.t, 2*time.Minute, fmt.Sprintf("kube-proxy on %s load-balances to exactly %v", n, want), func(ctx context.Context) error {
			got, err := sc.proxyEndpoints(ctx, n)
			if err != nil {
				return err
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("rules have %v", got)
			}
			sc.record(n, got, time.Now())
			return nil
		})
	}
}

// observe records, every 200 ms, what each live kube-proxy's rules hold.
func (sc *siteCluster) observe(ctx context.Context) {
	for ctx.Err() == nil {
		for _, n := range siteNodes {
			got, err := sc.proxyEndpoints(ctx, n)
			if err != nil {
				continue
			}
			sc.record(n, got, time.Now())
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cloudLists counts the full lists of Services and EndpointSlices the
// apiserver has served so far: LISTs and watch-lists (a watch with
// sendInitialEvents, which client-go's informers use where the apiserver
// offers it), from its apiserver_request_total and
// apiserver_watch_list_duration_seconds. Only the wrappers list them.
func (sc *siteCluster) cloudLists() map[string]float64 {
	sc.t.Helper()
	raw, err := sc.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(sc.ctx)
	if err != nil {
		sc.t.Fatalf("apiserver metrics: %v", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		list := strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `verb="LIST"`)
		watchList := strings.HasPrefix(line, "apiserver_watch_list_duration_seconds_count{")
		if !list && !watchList {
			continue
		}
		for _, res := range []string{"services", "endpointslices"} {
			if strings.Contains(line, `resource="`+res+`"`) {
				var v float64
				if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
					out[res] += v
				}
			}
		}
	}
	if out["endpointslices"] == 0 {
		var lines []string
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, "endpointslices") && !strings.HasPrefix(line, "#") {
				lines = append(lines, line)
			}
		}
		sc.t.Fatalf("the apiserver counts no list of EndpointSlices, though the leader listed them: the count is misread; its metrics on them:\n%s", strings.Join(lines, "\n"))
	}
	return out
}

// record notes what node's rules held at now.
func (sc *siteCluster) record(node string, got []string, now time.Time) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(got) == 0 {
		sc.lost = append(sc.lost, fmt.Sprintf("%s at %s", node, now.Format(time.StampMilli)))
	}
	for _, ip := range got {
		if k, ok := endpointWrite(ip); ok {
			if sc.seen[node] == nil {
				sc.seen[node] = map[int]time.Time{}
			}
			if _, dup := sc.seen[node][k]; !dup {
				sc.seen[node][k] = now
			}
		}
	}
}

// write changes the slice's endpoint to the next k.
func (sc *siteCluster) write(ctx context.Context) error {
	sc.mu.Lock()
	k := sc.k + 1
	sc.mu.Unlock()
	ep := sc.endpoint(k)
	patch := fmt.Sprintf(`{"endpoints":[{"addresses":[%q],"conditions":{"ready":true},"nodeName":"site0"}]}`, ep.Addresses[0])
	if _, err := sc.client.DiscoveryV1().EndpointSlices(siteSvcNS).Patch(ctx, siteSlice, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}
	sc.mu.Lock()
	sc.k, sc.written[k] = k, time.Now()
	sc.mu.Unlock()
	return nil
}

// The failover bounds wrapper/sitestream/README.md promises, with the
// defaults (LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s), plus
// the 200 ms at which the test samples kube-proxy's rules:
//   - a node that reaches the cloud, whatever fails: 15 s;
//   - a node cut from the cloud (or whose wrapper stalled), which has no
//     fresher source than a leader and a new leader only once the old
//     one's Lease has expired: LeaseDuration plus RenewDeadline plus five
//     RetryPeriods (the candidate's jittered retries, the questions to its
//     peers), 35 s.
const (
	boundReachingCloud = 15*time.Second + 200*time.Millisecond
	boundCutFromCloud  = 15*time.Second + 10*time.Second + 5*2*time.Second + 200*time.Millisecond
)

// scenario changes the endpoint every 500 ms while disrupt runs and until
// it returns, and reports per node the longest time a write took to reach
// kube-proxy's rules (or a later write did): the longest gap a kube-proxy
// of the site went through, against its bound (boundReachingCloud, or
// boundCutFromCloud for the nodes in cutOff), which it must not pass.
// Nodes in skip are left out (their wrapper is down on purpose).
func (sc *siteCluster) scenario(name string, skip, cutOff []string, disrupt func()) {
	sc.t.Helper()
	sc.mu.Lock()
	first := sc.k + 1
	sc.mu.Unlock()
	listsBefore := sc.cloudLists()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			if err := sc.write(sc.ctx); err != nil {
				sc.t.Logf("%s: writing the slice: %v", name, err)
			}
		}
	})
	disrupt()
	close(stop)
	wg.Wait()
	live := []string{}
	for _, n := range siteNodes {
		if !containsString(skip, n) {
			live = append(live, n)
		}
	}
	sc.waitRules(live...)
	// The EndpointSlice changes every 500 ms, so every source still holds
	// any version a wrapper resumes from: each resumes its watch, from the
	// apiserver or a leader, and none lists EndpointSlices from the cloud
	// again. (Services are quiet: a follower's version of them may be older
	// than the apiserver's watch cache holds, which makes it relist them.)
	lists := sc.cloudLists()
	if d := lists["endpointslices"] - listsBefore["endpointslices"]; d != 0 {
		sc.t.Errorf("%s: the site listed EndpointSlices from the apiserver %v times, want every watch resumed", name, d)
	}
	sc.t.Logf("%s: lists from the apiserver during it: EndpointSlices %v, Services %v", name,
		lists["endpointslices"]-listsBefore["endpointslices"], lists["services"]-listsBefore["services"])
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var report []string
	for _, n := range live {
		longest, at := time.Duration(0), 0
		for k := first; k <= sc.k; k++ {
			var shown time.Time
			for k2, when := range sc.seen[n] {
				if k2 >= k && (shown.IsZero() || when.Before(shown)) {
					shown = when
				}
			}
			if d := shown.Sub(sc.written[k]); !shown.IsZero() && d > longest {
				longest, at = d, k
			}
		}
		bound := boundReachingCloud
		if containsString(cutOff, n) {
			bound = boundCutFromCloud
		}
		report = append(report, fmt.Sprintf("%s %s of %s (write %d)", n, longest.Round(10*time.Millisecond), bound.Round(time.Second), at))
		if longest > bound {
			sc.t.Errorf("%s: %s's kube-proxy went %s without a write reaching its rules (write %d), past the bound of %s", name, n, longest.Round(10*time.Millisecond), at, bound.Round(time.Second))
		}
	}
	sc.t.Logf("%s: %d writes; longest gap per kube-proxy (write to its rules, sampled every 200 ms) against its bound: %s", name, sc.k-first+1, strings.Join(report, ", "))
	if len(sc.lost) > 0 {
		sc.t.Errorf("%s: kube-proxy's rules lost every endpoint of the Service (a spurious DELETE): %v", name, sc.lost)
	}
}

var siteEvent = regexp.MustCompile(`Site stream|site stream|site's Lease|peer names`)

// logTimeline logs every wrapper's site-stream events, in its own words.
func (sc *siteCluster) logTimeline() {
	var lines []string
	for _, n := range siteNodes {
		if p := sc.nodes[n].wrapper; p != nil {
			for _, line := range strings.Split(p.Log(), "\n") {
				if siteEvent.MatchString(line) {
					if len(line) > 260 {
						line = line[:260] + "..."
					}
					lines = append(lines, n+": "+line)
				}
			}
		}
	}
	sc.t.Logf("site stream events (each wrapper's log):\n%s", strings.Join(lines, "\n"))
}

// holder is the node the site's Lease names ("" for none).
func (sc *siteCluster) holder(ctx context.Context) (string, error) {
	l, err := sc.client.CoordinationV1().Leases(siteNS).Get(ctx, siteLeaseName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	node, _, _ := strings.Cut(ptr.Deref(l.Spec.HolderIdentity, ""), "@")
	return node, nil
}

func (sc *siteCluster) waitLeader(name string) {
	sc.t.Helper()
	testwait.Eventually(sc.ctx, sc.t, 2*time.Minute, name+" holds the site's Lease", func(ctx context.Context) error {
		h, err := sc.holder(ctx)
		if err == nil && h != name {
			err = fmt.Errorf("the Lease names %q", h)
		}
		return err
	})
}

// waitLeaderOtherThan waits until a node other than name holds the site's
// Lease, and returns it.
func (sc *siteCluster) waitLeaderOtherThan(name string) string {
	sc.t.Helper()
	var leader string
	testwait.Eventually(sc.ctx, sc.t, 2*time.Minute, "a node other than "+name+" leads", func(ctx context.Context) error {
		h, err := sc.holder(ctx)
		if err == nil && (h == name || h == "") {
			err = fmt.Errorf("the Lease names %q", h)
		}
		leader = h
		return err
	})
	return leader
}

var (
	sourceChanged = regexp.MustCompile(`"Site stream source changed" .*leader="([^"]*)"`)
	leaderAnswers = regexp.MustCompile(`"Site stream leader (given up: reading from the apiserver|answers again)" .*leader="([^"]*)"`)
)

// source is whom the node's wrapper reads from, by its log: a leader's
// node name, "" for the apiserver.
func (sc *siteCluster) source(name string) string {
	src, given := "", false
	for _, line := range strings.Split(sc.nodes[name].wrapper.Log(), "\n") {
		if m := sourceChanged.FindStringSubmatch(line); m != nil {
			src, given = m[1], false
		} else if m := leaderAnswers.FindStringSubmatch(line); m != nil && m[2] == src {
			given = strings.HasPrefix(m[1], "given up")
		}
	}
	if given {
		return ""
	}
	return src
}

func (sc *siteCluster) waitFollows(name, leader string) {
	sc.t.Helper()
	testwait.Eventually(sc.ctx, sc.t, 2*time.Minute, name+" reads from "+leader, func(context.Context) error {
		if src := sc.source(name); src != leader {
			return fmt.Errorf("it reads from %q", src)
		}
		return nil
	})
}

// cut drops, in the node's namespace, every packet to or from addrs; heal
// lifts it.
func (sc *siteCluster) cut(name string, addrs ...net.IP) {
	sc.t.Helper()
	var set []string
	for _, a := range addrs {
		set = append(set, a.String())
	}
	rules := fmt.Sprintf(`table inet %[1]s {
	chain in { type filter hook input priority -300; policy accept; ip saddr { %[2]s } drop; }
	chain out { type filter hook output priority -300; policy accept; ip daddr { %[2]s } drop; }
}
`, siteCutTable, strings.Join(set, ", "))
	cmd := sc.nodes[name].fabric.NS.Command(sc.ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		sc.t.Fatalf("cut %s from %v: %v: %s", name, set, err, out)
	}
	sc.t.Logf("%s cut from %v", name, set)
}

func (sc *siteCluster) heal(name string) {
	sc.t.Helper()
	if out, err := sc.nodes[name].fabric.NS.Run(sc.ctx, "nft", "delete", "table", "inet", siteCutTable); err != nil {
		sc.t.Fatalf("heal %s: %v: %s", name, err, out)
	}
	sc.t.Logf("%s healed", name)
}

func (sc *siteCluster) ip(name string) net.IP { return sc.nodes[name].fabric.IP }

// others are the site's nodes but name.
func others(name string) []string {
	var out []string
	for _, n := range siteNodes {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// The leader is killed while one follower is cut from the cloud: the other
// follower resumes from the apiserver and takes the Lease when it expires;
// the cut one, which cannot read the Lease, learns the new leader from its
// peers; kube-proxy's rules follow the writes throughout. The killed
// wrapper, restarted, follows the new leader.
func TestSiteStreamNetnsLeaderKilled(t *testing.T) {
	sc := startSite(t)
	sc.cut("site2", sc.fabric.RootIP)
	sc.scenario("leader killed, site2 cut from the cloud", []string{"site0"}, []string{"site2"}, func() {
		if err := syscall.Kill(sc.nodes["site0"].wrapper.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		sc.waitLeader("site1")
		sc.waitFollows("site2", "site1")
	})
	sc.heal("site2")
	sc.nodes["site0"].wrapper.Stop(time.Second)
	sc.startWrapper("site0")
	sc.waitFollows("site0", "site1")
	sc.waitRules(siteNodes...)
}

// The leader is cut from the cloud only: it stops leading, a follower takes
// the Lease when it expires, and the old leader, still cut, learns it from
// its peers and reads from it over the site's LAN.
func TestSiteStreamNetnsLeaderCutFromCloud(t *testing.T) {
	sc := startSite(t)
	sc.scenario("leader cut from the cloud", nil, []string{"site0"}, func() {
		sc.cut("site0", sc.fabric.RootIP)
		leader := sc.waitLeaderOtherThan("site0")
		sc.waitFollows("site0", leader)
		for _, n := range others("site0") {
			if n != leader {
				sc.waitFollows(n, leader)
			}
		}
	})
	sc.heal("site0")
}

// The leader is cut from the site only: it keeps the Lease; the followers
// give it up, read from the apiserver meanwhile, and return to it once it
// answers again.
func TestSiteStreamNetnsLeaderCutFromSite(t *testing.T) {
	sc := startSite(t)
	sc.scenario("leader cut from the site", nil, nil, func() {
		sc.cut("site0", sc.ip("site1"), sc.ip("site2"))
		for _, n := range others("site0") {
			sc.waitFollows(n, "")
		}
		// Writes keep reaching every kube-proxy for a while.
		time.Sleep(3 * time.Second)
	})
	sc.waitLeader("site0")
	sc.heal("site0")
	for _, n := range others("site0") {
		sc.waitFollows(n, "site0")
	}
	sc.scenario("after the site link is back", nil, nil, func() { time.Sleep(2 * time.Second) })
}

// Two leaders briefly: the leader's process is paused past the Lease's
// expiry (as a long stall would), a follower takes the Lease, and the old
// leader resumes believing it still leads until its next renewal fails.
func TestSiteStreamNetnsTwoLeaders(t *testing.T) {
	sc := startSite(t)
	pid := sc.nodes["site0"].wrapper.PID()
	var leader string
	// site0's own wrapper is stalled: its kube-proxy waits as a cut node's.
	sc.scenario("two leaders (the leader paused past its Lease)", nil, []string{"site0"}, func() {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		leader = sc.waitLeaderOtherThan("site0")
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		sc.waitFollows("site0", leader)
	})
	// It may follow the new leader (told by a peer) before its elector
	// finds the Lease taken.
	stopped := regexp.MustCompile(`"No longer leading the site stream"`)
	testwait.Eventually(sc.ctx, t, 2*time.Minute, "site0 stops leading", func(context.Context) error {
		if !stopped.MatchString(sc.nodes["site0"].wrapper.Log()) {
			return fmt.Errorf("site0 has not logged that it stopped leading")
		}
		return nil
	})
	for _, n := range others("site0") {
		if n != leader {
			sc.waitFollows(n, leader)
		}
	}
}
