package wrapper_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/controller"
	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// fleetNodeStatus is a Node status as a kubelet reports it: conditions with
// heartbeat times, addresses, capacity, node info and the 50 largest images
// (kubelet's nodeStatusMaxImages; about 14 KB of JSON, as a real Node's).
func fleetNodeStatus(i int, beat time.Time) []byte {
	ts := beat.UTC().Format(time.RFC3339)
	var conds []string
	for _, c := range [][3]string{
		{"MemoryPressure", "False", "KubeletHasSufficientMemory"}, {"DiskPressure", "False", "KubeletHasNoDiskPressure"},
		{"PIDPressure", "False", "KubeletHasSufficientPID"}, {"Ready", "True", "KubeletReady"},
	} {
		conds = append(conds, fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"message":"kubelet reports %s","lastHeartbeatTime":%q,"lastTransitionTime":"2026-01-01T00:00:00Z"}`,
			c[0], c[1], c[2], strings.ToLower(c[2]), ts))
	}
	var images []string
	for k := range kubeletMaxImages {
		images = append(images, fmt.Sprintf(`{"names":["registry.example.com/team/app-%02d@sha256:%064x","registry.example.com/team/app-%02d:v1.%d.0"],"sizeBytes":%d}`,
			k, k*7919+1, k, k, 10_000_000+k*1_234_567))
	}
	return fmt.Appendf(nil, `{"status":{"conditions":[%s],"addresses":[{"type":"InternalIP","address":"10.20.%d.%d"},{"type":"Hostname","address":"fleet%03d"}],`+
		`"capacity":{"cpu":"4","memory":"8049876Ki","pods":"110","ephemeral-storage":"61255492Ki"},"allocatable":{"cpu":"4","memory":"7947476Ki","pods":"110","ephemeral-storage":"56453061Ki"},`+
		`"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}},"nodeInfo":{"machineID":"%032x","systemUUID":"%032x","bootID":"%032x","kernelVersion":"6.1.0-27-arm64","osImage":"Debian GNU/Linux 12 (bookworm)",`+
		`"containerRuntimeVersion":"containerd://1.7.24","kubeletVersion":"v1.37.1","kubeProxyVersion":"","operatingSystem":"linux","architecture":"arm64"},"images":[%s]}}`,
		strings.Join(conds, ","), i/250, i%250, i, i, i+1, i+2, strings.Join(images, ","))
}

// kubeProxyInformers are client-go informers in kube-proxy v1.37's shape
// (Services and EndpointSlices with its selector, its own Node), protobuf.
// Their first watch of each resource is a watch-list (sendInitialEvents),
// which kube-apiserver v1.37 sends gzip-compressed.
func kubeProxyInformers(tb testing.TB, cfg *rest.Config, node string) (synced func() bool, endpointSlices cache.Store) {
	tb.Helper()
	return kubeProxyInformersOf(tb, kubernetes.NewForConfigOrDie(kubeProxyConfig(cfg)), node)
}

func kubeProxyConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf + ",application/json"
	return cfg
}

// rewatchingKubeProxy is kube-proxy's client as its informers use it once
// their first watch has ended (after 5-10 minutes, client-go's watch
// timeout) or after a relist that fell back to LIST: client-go's reflector
// watches on from the last resourceVersion with a plain watch, which
// kube-apiserver v1.37 does not compress. Informers of a client that says
// it does not support watch-list semantics list and then watch that way
// from the start.
type rewatchingKubeProxy struct{ kubernetes.Interface }

func (rewatchingKubeProxy) IsWatchListSemanticsUnSupported() bool { return true }

func kubeProxyInformersOf(tb testing.TB, c kubernetes.Interface, node string) (synced func() bool, endpointSlices cache.Store) {
	tb.Helper()
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = kubeProxySelector
	}))
	nf := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + node
	}))
	hasSynced := []cache.InformerSynced{
		f.Core().V1().Services().Informer().HasSynced,
		f.Discovery().V1().EndpointSlices().Informer().HasSynced,
		nf.Core().V1().Nodes().Informer().HasSynced,
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() { cancel(); f.Shutdown(); nf.Shutdown() })
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	return func() bool {
		for _, s := range hasSynced {
			if !s() {
				return false
			}
		}
		return true
	}, f.Discovery().V1().EndpointSlices().Informer().GetStore()
}

// fleet is the cluster BenchmarkFleet and BenchmarkReconnectStorm share: a
// real kube-apiserver with kube-controller-manager's endpointslice and
// endpoints controllers, nodesN Nodes in fleetUnits nodeunits with
// kubelet-sized status, servicesN topology Services with 2 ready pods each
// (slices made by the controller), and the application-grid-controller's
// summary writer.
type fleet struct {
	cp                *controlplane.ControlPlane
	admin             kubernetes.Interface
	nodesN, servicesN int
	beat              time.Time

	mu      sync.Mutex
	readyAt time.Time // last pod's ready time: every pod's is distinct
	pods    int       // ready pod addresses the slices list
}

const (
	fleetUnits = 6
	fleetNS    = "fleet"
)

func fleetNodeName(i int) string { return fmt.Sprintf("fleet%03d", i) }
func fleetUnitOf(i int) int      { return i % fleetUnits }

// kubeletMaxImages is how many images a kubelet lists in its Node's status
// (its nodeStatusMaxImages default).
const kubeletMaxImages = 50

// fleetParallel runs f(0..n-1), 8 at a time.
func fleetParallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

func startFleet(b *testing.B, nodesN, servicesN int, apiserverArgs ...string) *fleet {
	cp := controlplane.StartForTest(b, controlplane.Options{
		ControllerManager: true,
		Controllers:       "endpointslice-controller,endpoints-controller",
		// Its heap profile forces a garbage collection: heap figures
		// without the collector's timing in them.
		APIServerArgs: append([]string{"--profiling=true"}, apiserverArgs...),
	})
	ctx := b.Context()
	f := &fleet{cp: cp, admin: adminClient(cp), nodesN: nodesN, servicesN: servicesN, beat: time.Now(), readyAt: time.Now().Add(-24 * time.Hour)}
	if err := controller.EnsureCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		b.Fatal(err)
	}
	fleetParallel(nodesN, func(i int) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fleetNodeName(i), Labels: map[string]string{
			gridKey: fmt.Sprintf("unit-%d", fleetUnitOf(i)), "kubernetes.io/hostname": fleetNodeName(i), "kubernetes.io/os": "linux",
			"kubernetes.io/arch": "arm64", "node.kubernetes.io/instance-type": "edge-small", "topology.kubernetes.io/zone": fmt.Sprintf("z%d", fleetUnitOf(i)),
		}}}
		if _, err := f.admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			b.Error(err)
			return
		}
		if _, err := f.admin.CoreV1().Nodes().PatchStatus(ctx, n.Name, fleetNodeStatus(i, f.beat)); err != nil {
			b.Error(err)
		}
	})
	createNamespace(b, f.admin, fleetNS)
	if _, err := f.admin.CoreV1().ServiceAccounts(fleetNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	fleetParallel(servicesN, func(k int) {
		name := fleetService(k)
		createService(b, f.admin, fleetNS, name, `["zone1"]`)
		setSelector(b, f.admin, fleetNS, name, map[string]string{"app": name})
		for j := range 2 {
			node, ip := f.initialPod(k, j)
			readyPod(b, f.admin, fleetNS, name, fmt.Sprintf("%s-%d", name, j), fleetNodeName(node), ip, f.next())
		}
	})
	f.pods = 2 * servicesN
	eventually(b, "the endpointslice controller lists every pod", 5*time.Minute, func(ctx context.Context) (bool, error) {
		return f.addresses(ctx) == f.pods, nil
	})
	runController(b, cp.Config)
	eventually(b, "node label summaries of every node", 5*time.Minute, func(ctx context.Context) (bool, error) {
		return summarised(ctx, nodesFunc(func() ([]corev1.Node, error) {
			l, err := f.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		}), versioned.NewForConfigOrDie(cp.Config), gridKey)
	})
	return f
}

func fleetService(k int) string { return fmt.Sprintf("s%03d", k) }

// initialPod is where Service k's pod j runs and its address.
func (f *fleet) initialPod(k, j int) (node int, ip string) {
	return (k*7 + j*13) % f.nodesN, fmt.Sprintf("10.30.%d.%d", k, j+1)
}

func (f *fleet) next() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readyAt = f.readyAt.Add(time.Second)
	return f.readyAt
}

// addresses counts the addresses in the fleet's EndpointSlices (-1: not listed).
func (f *fleet) addresses(ctx context.Context) int {
	return sliceAddresses(ctx, f.admin, fleetNS, "")
}

// addPod adds a ready pod of Service k on node, waits until the
// controller's slice lists it and returns its address.
func (f *fleet) addPod(b *testing.B, k, node int) string {
	f.mu.Lock()
	f.pods++
	want := f.pods
	f.mu.Unlock()
	ip := fmt.Sprintf("10.31.%d.%d", want/250, want%250)
	readyPod(b, f.admin, fleetNS, fleetService(k), fmt.Sprintf("%s-f%d", fleetService(k), want), fleetNodeName(node), ip, f.next())
	eventually(b, "the controller's slice lists the pod", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return f.addresses(ctx) == want, nil
	})
	return ip
}

// statusRound: every node for which report says so reports its status
// once, as its kubelet does when only the heartbeat times moved.
func (f *fleet) statusRound(b *testing.B, report func(i int) bool) {
	f.beat = f.beat.Add(10 * time.Second)
	fleetParallel(f.nodesN, func(i int) {
		if !report(i) {
			return
		}
		if _, err := f.admin.CoreV1().Nodes().PatchStatus(b.Context(), fleetNodeName(i), kubeletHeartbeat(f.beat)); err != nil {
			b.Error(err)
		}
	})
}

// cycleCPU runs a fixed load of changes runs times (every node reports its
// status, churn Services change, churn endpoints go unready and ready
// again) and returns the apiserver's CPU seconds over a 20 s window from
// each start, sorted: the median, and the spread, which is the noise.
func (f *fleet) cycleCPU(b *testing.B, runs, churn int) []float64 {
	var cpu []float64
	for range runs {
		start, l0 := time.Now(), readAPIServerLoad(b, f.cp, f.admin)
		f.statusRound(b, func(int) bool { return true })
		f.touchServices(b, churn)
		f.setReady(b, churn, false)
		f.setReady(b, churn, true)
		time.Sleep(time.Until(start.Add(20 * time.Second)))
		cpu = append(cpu, readAPIServerLoad(b, f.cp, f.admin).cpuSeconds-l0.cpuSeconds)
	}
	slices.Sort(cpu)
	return cpu
}

// touchServices changes a label of the first n Services.
func (f *fleet) touchServices(b *testing.B, n int) {
	for k := range n {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"example.com/revision":"r%d"}}}`, time.Now().UnixNano())
		if _, err := f.admin.CoreV1().Services(fleetNS).Patch(b.Context(), fleetService(k), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// setReady reports the first pod of the first n Services ready or not.
func (f *fleet) setReady(b *testing.B, n int, ready bool) {
	status := "False"
	if ready {
		status = "True"
	}
	fleetParallel(n, func(k int) {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"lastTransitionTime":%q}]}}`, status, f.next().UTC().Format(time.RFC3339))
		if _, err := f.admin.CoreV1().Pods(fleetNS).Patch(b.Context(), fleetService(k)+"-0", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			b.Error(err)
		}
	})
}

func (f *fleet) relabel(b *testing.B, node int, unit string) {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, gridKey, unit)
	if _, err := f.admin.CoreV1().Nodes().Patch(b.Context(), fleetNodeName(node), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		b.Fatal(err)
	}
}

// fleetEdge is one edge node of BenchmarkFleet: its wrapper (bytes from
// the apiserver counted), kube-proxy-shaped informers pointed straight at
// the apiserver, and ones behind the wrapper (bytes from the wrapper).
type fleetEdge struct {
	node                   int
	upstream, direct, down *byteCounter
	// The same links' bytes on the wire (TLS records and HTTP/2 frames to
	// the apiserver, HTTP/1.1 on loopback to the wrapper), both directions.
	upWire, directWire, downWire *wireCounter
	// kube-proxy-shaped informers straight to the apiserver once their
	// first watch has ended (rewatchingKubeProxy), counted apart.
	rewatch       *byteCounter
	rewatchWire   *wireCounter
	rewatchSynced func() bool
	wrapper       *runningWrapper
	directSynced  func() bool
	downSynced    func() bool
	served        cache.Store // the EndpointSlices the wrapper serves its kube-proxy
}

func (e *fleetEdge) serves(ip string) bool {
	for _, o := range e.served.List() {
		for _, ep := range o.(*discoveryv1.EndpointSlice).Endpoints {
			if slices.Contains(ep.Addresses, ip) {
				return true
			}
		}
	}
	return false
}

func bytesOf(c *byteCounter) int64 {
	var n int64
	for _, k := range []string{"nodes", "node", "summaries", "endpoints", "other"} {
		n += c.get(k)
	}
	return n
}

// BenchmarkFleet: the fleet above (SG_FLEET_NODES, 300 nodes; 100
// Services) with SG_FLEET_WRAPPERS (50) real wrappers, each for its own
// node in nodeunits 0-4, next to as many kube-proxy-shaped informer sets
// pointed straight at the apiserver for the same nodes, and one behind
// each wrapper. It reports, side by side in one run, the kube-apiserver's
// CPU, memory and watches per added wrapper and per added kube-proxy-shaped
// client, and per kind of event the bytes each edge node received from the
// apiserver (wrapper upstream, kube-proxy direct) and what the wrapper then
// sent its kube-proxy, with the time a change takes to reach every
// wrapper's kube-proxy. SG_FLEET_CPU_RUNS (5) is how many 20 s change
// cycles measure the apiserver's CPU per phase; 0 leaves the CPU of change
// cycles out (a bytes-only run, as make bench-check makes).
func BenchmarkFleet(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/wrapper-fleet.md")
	nodesN, wrappersN := envInt("SG_FLEET_NODES", 300), envInt("SG_FLEET_WRAPPERS", 50)
	cpuRuns := 5
	if v := os.Getenv("SG_FLEET_CPU_RUNS"); v != "" {
		var err error
		if cpuRuns, err = strconv.Atoi(v); err != nil || cpuRuns < 0 {
			b.Fatalf("SG_FLEET_CPU_RUNS=%q: want 0 or more", v)
		}
	}
	const servicesN, churn = 100, 20
	// The own nodeunit's endpoint changes go to nodeunit 0's nodes past the
	// first 10*fleetUnits, where the edge nodes are.
	if minNodes := 11 * fleetUnits; nodesN < minNodes {
		b.Fatalf("SG_FLEET_NODES=%d: want at least %d (nodeunit 0 needs nodes past its edge nodes for its endpoint changes)", nodesN, minNodes)
	}
	f := startFleet(b, nodesN, servicesN)
	kubelets := startKubelets(b, f)
	ctx := b.Context()

	// Edge nodes: the first wrappersN nodes outside nodeunit 5.
	var edge []*fleetEdge
	for i := 0; i < nodesN && len(edge) < wrappersN; i++ {
		if fleetUnitOf(i) != fleetUnits-1 {
			edge = append(edge, &fleetEdge{node: i, upstream: &byteCounter{bytes: map[string]int64{}},
				direct: &byteCounter{bytes: map[string]int64{}}, down: &byteCounter{bytes: map[string]int64{}},
				upWire: newWireCounter(), directWire: newWireCounter(), downWire: newWireCounter(),
				rewatch: &byteCounter{bytes: map[string]int64{}}, rewatchWire: newWireCounter()})
		}
	}
	all := func(*fleetEdge) bool { return true }
	inUnit0 := func(e *fleetEdge) bool { return fleetUnitOf(e.node) == 0 }
	perNode := func(of func(*fleetEdge) int64, who func(*fleetEdge) bool) float64 {
		var n, k float64
		for _, e := range edge {
			if who(e) {
				n += float64(of(e))
				k++
			}
		}
		return n / k
	}
	up := func(e *fleetEdge) int64 { return bytesOf(e.upstream) }
	direct := func(e *fleetEdge) int64 { return bytesOf(e.direct) }
	down := func(e *fleetEdge) int64 { return bytesOf(e.down) }
	rewatch := func(e *fleetEdge) int64 { return bytesOf(e.rewatch) }
	rewatchWire := func(e *fleetEdge) int64 { return e.rewatchWire.total() }
	upWire := func(e *fleetEdge) int64 { return e.upWire.total() }
	directWire := func(e *fleetEdge) int64 { return e.directWire.total() }
	downWire := func(e *fleetEdge) int64 { return e.downWire.total() }
	everything := func() float64 {
		var n float64
		for _, c := range []func(*fleetEdge) int64{up, direct, down, rewatch, upWire, directWire, downWire, rewatchWire} {
			n += perNode(c, all)
		}
		return n
	}
	// settle waits until the counters have moved by no more than BOOKMARKs
	// (a few bytes a second per watch) for 3s: every edge node has
	// received what the changes sent it.
	settle := func() {
		last, still := -1.0, 0
		for still < 6 {
			time.Sleep(500 * time.Millisecond)
			cur := everything()
			if last >= 0 && cur-last < 100 {
				still++
			} else {
				still = 0
			}
			last = cur
		}
	}
	load := func() apiserverLoad { return readAPIServerLoad(b, f.cp, f.admin) }
	// heap is the apiserver's Go heap in use right after a garbage
	// collection (its heap profile forces one), median of 3.
	heap := func() float64 {
		var h []float64
		for range 3 {
			if _, err := f.admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx); err != nil {
				b.Fatal(err)
			}
			h = append(h, load().heapBytes)
		}
		slices.Sort(h)
		return h[1]
	}
	idleStart, idle0 := time.Now(), load()
	time.Sleep(10 * time.Second)
	idle1 := load()
	idleRate := (idle1.cpuSeconds - idle0.cpuSeconds) / time.Since(idleStart).Seconds()
	cpu0 := f.cycleCPU(b, cpuRuns, churn)
	h0 := heap()

	// syncCPU is the apiserver's CPU from l0 to now above its idle rate.
	syncCPU := func(at time.Time, l0, l1 apiserverLoad) float64 {
		return l1.cpuSeconds - l0.cpuSeconds - idleRate*time.Since(at).Seconds()
	}
	at, l0 := time.Now(), load()
	for _, e := range edge {
		e.wrapper = startWrapper(b, f.cp, fleetNodeName(e.node), "", wrapper.Options{Upstream: e.upstream.wrap(e.upWire.wrap(b, f.cp.Config))})
	}
	eventually(b, "every wrapper synced", 5*time.Minute, func(context.Context) (bool, error) {
		for _, e := range edge {
			if !e.wrapper.srv.Ready() {
				return false, nil
			}
		}
		return true, nil
	})
	settle()
	l1 := load()
	wrapperSync := syncCPU(at, l0, l1)
	wrapperInitial, wrapperInitialWire := perNode(up, all), perNode(upWire, all)
	h1 := heap()
	b.Logf("the first wrapper's upstream requests at start: %q", edge[0].upstream.requests())
	cpu1 := f.cycleCPU(b, cpuRuns, churn)
	h1b := heap()

	at, l1 = time.Now(), load()
	for _, e := range edge {
		e.directSynced, _ = kubeProxyInformers(b, e.direct.wrap(e.directWire.wrap(b, f.cp.Config)), fleetNodeName(e.node))
	}
	eventually(b, "kube-proxy-shaped informers synced", 5*time.Minute, func(context.Context) (bool, error) {
		for _, e := range edge {
			if !e.directSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	settle()
	l2 := load()
	directSync := syncCPU(at, l1, l2)
	directInitial, directInitialWire := perNode(direct, all), perNode(directWire, all)
	h2 := heap()
	cpu2 := f.cycleCPU(b, cpuRuns, churn)

	n := float64(len(edge))
	b.Logf("%d nodes, %d Services, %d edge nodes; apiserver idle %.3f CPU; load average %s", nodesN, servicesN, len(edge), idleRate, loadAverage())
	b.Logf("kube-apiserver per added client        %12s %12s", "kube-proxy", "wrapper")
	row := func(what string, d, w float64, unit string) {
		ratio := 0.0
		if d != 0 {
			ratio = w / d
		}
		b.Logf("  %-36s %12.3f %12.3f  ratio %.2f (%s)", what, d, w, ratio, unit)
	}
	row("watches", (l2.watches-l1.watches)/n, (l1.watches-l0.watches)/n, "open WATCH requests")
	if l0.registered >= 0 {
		row("registered watchers", (l2.registered-l1.registered)/n, (l1.registered-l0.registered)/n, "apiserver_registered_watchers")
	}
	b.Logf("  RSS (MiB, moves with the Go runtime's returns of memory): no client %.0f, +%d wrappers %.0f, +%d kube-proxy %.0f",
		l0.rssBytes/(1<<20), len(edge), l1.rssBytes/(1<<20), len(edge), l2.rssBytes/(1<<20))
	if h0 >= 0 {
		row("Go heap in use after a GC", (h2-h1b)/n/1024, (h1-h0)/n/1024, "KiB")
	}
	row("CPU for the initial sync", directSync/n*1000, wrapperSync/n*1000, "ms")
	mid := func(r []float64) float64 { return r[len(r)/2] }
	width := func(r []float64) float64 { return r[len(r)-1] - r[0] }
	if cpuRuns > 0 {
		row(fmt.Sprintf("CPU for a change cycle (median of %d)", cpuRuns), (mid(cpu2)-mid(cpu1))/n*1000, (mid(cpu1)-mid(cpu0))/n*1000, "ms")
		b.Logf("  change cycle CPU runs, s: no client %.2f, +%d wrappers %.2f, +%d kube-proxy %.2f (noise: runs of a phase spread %.2f-%.2f s)",
			cpu0, len(edge), cpu1, len(edge), cpu2,
			min(width(cpu0), width(cpu1), width(cpu2)), max(width(cpu0), width(cpu1), width(cpu2)))
	}
	// Long-running requests (the watches) count when they end: only short ones here.
	for _, verb := range []string{"LIST", "GET"} {
		row(verb+" requests at start", (l2.requests[verb]-l1.requests[verb])/n, (l1.requests[verb]-l0.requests[verb])/n, "requests")
	}
	benchRec.Report((l1.watches-l0.watches)/n, "wrapper-watches/client")
	benchRec.Report((l2.watches-l1.watches)/n, "direct-watches/client")
	if cpuRuns > 0 {
		benchRec.Report((mid(cpu1)-mid(cpu0))/n*1000, "wrapper-cycle-ms/client")
		benchRec.Report((mid(cpu2)-mid(cpu1))/n*1000, "direct-cycle-ms/client")
	}

	// kube-proxy behind each wrapper: what the wrapper sends it.
	for _, e := range edge {
		e.downSynced, e.served = kubeProxyInformers(b, e.down.wrap(e.downWire.wrap(b, &rest.Config{Host: e.wrapper.URL(), QPS: -1})), fleetNodeName(e.node))
	}
	eventually(b, "kube-proxy behind every wrapper synced", 5*time.Minute, func(context.Context) (bool, error) {
		for _, e := range edge {
			if !e.downSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	settle()
	downInitial, downInitialWire := perNode(down, all), perNode(downWire, all)
	// kube-proxy as it reads once its first watch has ended.
	for _, e := range edge {
		c := kubernetes.NewForConfigOrDie(kubeProxyConfig(e.rewatch.wrap(e.rewatchWire.wrap(b, f.cp.Config))))
		e.rewatchSynced, _ = kubeProxyInformersOf(b, rewatchingKubeProxy{c}, fleetNodeName(e.node))
	}
	eventually(b, "rewatching kube-proxy-shaped informers synced", 5*time.Minute, func(context.Context) (bool, error) {
		for _, e := range edge {
			if !e.rewatchSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	settle()
	rewatchInitial, rewatchInitialWire := perNode(rewatch, all), perNode(rewatchWire, all)

	// Columns: kube-proxy straight to the apiserver on its first watch
	// (a watch-list, compressed) and on the watches after it (plain), the
	// wrapper's upstream, the wrapper to its kube-proxy (loopback, HTTP/1.1).
	b.Logf("%-52s %-50s | %s", "bytes per edge node", "decoded bodies", "on the wire (TLS, HTTP/2; both directions)")
	b.Logf("%-52s %9s %9s %9s %9s %6s | %9s %9s %9s %9s %6s %6s", "",
		"direct,", "direct,", "wrapper", "wrapper", "ratio", "direct,", "direct,", "wrapper", "wrapper", "ratio", "ratio")
	b.Logf("%-52s %9s %9s %9s %9s %6s | %9s %9s %9s %9s %6s %6s", "",
		"1st watch", "rewatch", "upstream", "to k-p", "w/1st", "1st watch", "rewatch", "upstream", "to k-p", "w/1st", "w/re")
	// Below 10 bytes an event is BOOKMARK noise: nothing.
	ratio := func(d, w float64) string {
		switch {
		case d >= 10:
			return fmt.Sprintf("%.3f", w/d)
		case w >= 10:
			return "more"
		}
		return "-"
	}
	// body and wire: direct (first watch), direct (rewatch), wrapper upstream, wrapper to kube-proxy.
	line := func(kind string, body, wire [4]float64) {
		b.Logf("%-52s %9.0f %9.0f %9.0f %9.0f %6s | %9.0f %9.0f %9.0f %9.0f %6s %6s", kind,
			body[0], body[1], body[2], body[3], ratio(body[0], body[2]),
			wire[0], wire[1], wire[2], wire[3], ratio(wire[0], wire[2]), ratio(wire[1], wire[2]))
		unit := strings.ReplaceAll(kind, " ", "-")
		benchRec.Report(body[0], "direct-B/"+unit)
		benchRec.Report(body[2], "wrapper-B/"+unit)
		benchRec.Report(wire[0], "direct-wire-B/"+unit)
		benchRec.Report(wire[1], "rewatch-wire-B/"+unit)
		benchRec.Report(wire[2], "wrapper-wire-B/"+unit)
		benchRec.Report(wire[3], "to-kube-proxy-wire-B/"+unit)
	}
	line("initial sync", [4]float64{directInitial, rewatchInitial, wrapperInitial, downInitial},
		[4]float64{directInitialWire, rewatchInitialWire, wrapperInitialWire, downInitialWire})
	report := func(kind string, events int, who func(*fleetEdge) bool, change func()) {
		counters := [8]func(*fleetEdge) int64{direct, rewatch, up, down, directWire, rewatchWire, upWire, downWire}
		var before [8]float64
		for x, c := range counters {
			before[x] = perNode(c, who)
		}
		change()
		settle()
		var per [8]float64
		for x, c := range counters {
			per[x] = (perNode(c, who) - before[x]) / float64(events)
		}
		line(kind, [4]float64(per[:4]), [4]float64(per[4:]))
	}
	// reach waits until every edge node of nodeunit 0 serves ip (or none
	// does), checks that no other edge node does, and returns how long
	// the last one took from since.
	reach := func(ip string, want bool, since time.Time) time.Duration {
		var took time.Duration
		eventually(b, fmt.Sprintf("every nodeunit-0 wrapper serves %s: %v", ip, want), 2*time.Minute, func(context.Context) (bool, error) {
			for _, e := range edge {
				if inUnit0(e) && e.serves(ip) != want {
					return false, nil
				}
			}
			took = time.Since(since)
			return true, nil
		})
		for _, e := range edge {
			if !inUnit0(e) && e.serves(ip) {
				b.Fatalf("the wrapper of %s (nodeunit %d) serves %s of nodeunit 0", fleetNodeName(e.node), fleetUnitOf(e.node), ip)
			}
		}
		return took
	}
	// A node of nodeunit 5 that runs a pod, to move into nodeunit 0 and back.
	moved, movedIP := -1, ""
	for k := range servicesN {
		if node, ip := f.initialPod(k, 0); fleetUnitOf(node) == fleetUnits-1 {
			moved, movedIP = node, ip
			break
		}
	}
	var ownTook, relabelTook []time.Duration
	for range b.N {
		notEdge := func(i int) bool { return !slices.ContainsFunc(edge, func(e *fleetEdge) bool { return e.node == i }) }
		report("another node's status report", nodesN-len(edge), all, func() { f.statusRound(b, notEdge) })
		report("another node's Lease renewal", nodesN-len(edge), all, func() { kubelets.leaseRound(b, notEdge) })
		report("a non-topology label change on another node", churn, all, func() {
			for k := range churn {
				patch := fmt.Sprintf(`{"metadata":{"labels":{"example.com/rack":"r%d"}}}`, k)
				if _, err := f.admin.CoreV1().Nodes().Patch(ctx, fleetNodeName(fleetUnits-1+(k%(nodesN/fleetUnits))*fleetUnits), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		report("an endpoint change in another nodeunit", churn, all, func() {
			for k := range churn {
				// Pods on nodes of nodeunit 5, which holds no edge node.
				f.addPod(b, k, fleetUnits-1+((k*5)%(nodesN/fleetUnits))*fleetUnits)
			}
		})
		report("an endpoint change in the own nodeunit (nodeunit 0)", churn, inUnit0, func() {
			for k := range churn {
				// Pods on nodes of nodeunit 0 past the edge nodes.
				node := 10*fleetUnits + (k%((nodesN-10*fleetUnits)/fleetUnits))*fleetUnits
				start := time.Now()
				ip := f.addPod(b, k, node)
				ownTook = append(ownTook, reach(ip, true, start))
			}
		})
		report("a relabel of another node into the own nodeunit and back", 10, all, func() {
			for range 5 {
				start := time.Now()
				f.relabel(b, moved, "unit-0")
				relabelTook = append(relabelTook, reach(movedIP, true, start))
				start = time.Now()
				f.relabel(b, moved, fmt.Sprintf("unit-%d", fleetUnits-1))
				relabelTook = append(relabelTook, reach(movedIP, false, start))
			}
		})
		report("a Service change", churn, all, func() { f.touchServices(b, churn) })
	}
	q := func(d []time.Duration, p float64) time.Duration {
		slices.Sort(d)
		return d[int(p*float64(len(d)-1))]
	}
	b.Logf("until every nodeunit-0 wrapper serves it to kube-proxy: a new ready pod p50 %v max %v (%d); a relabel p50 %v max %v (%d)",
		q(ownTook, 0.5).Round(time.Millisecond), q(ownTook, 1).Round(time.Millisecond), len(ownTook),
		q(relabelTook, 0.5).Round(time.Millisecond), q(relabelTook, 1).Round(time.Millisecond), len(relabelTook))
	benchRec.Report(float64(q(ownTook, 0.5).Milliseconds()), "endpoint-reach-p50-ms")
	benchRec.Report(float64(q(relabelTook, 0.5).Milliseconds()), "relabel-reach-p50-ms")
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}
