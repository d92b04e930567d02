package wrapper_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// The memory benchmark runs the wrapper and a baseline (plain client-go
// informers of the same resources) as two processes of this test binary, so
// each one's RSS is its own. These variables tell a helper process its role.
const (
	memRoleEnv       = "SG_MEMBENCH_ROLE" // "wrapper" or "baseline"
	memKubeconfigEnv = "SG_MEMBENCH_KUBECONFIG"
	memAddrEnv       = "SG_MEMBENCH_ADDR" // the wrapper's listen address
	memNodeEnv       = "SG_MEMBENCH_NODE"
	// memProfileEnv, when set, names a file prefix: each helper writes its
	// heap profile (inuse_space, after the forced GC) to PREFIX-ROLE.pprof.
	memProfileEnv = "SG_MEMBENCH_HEAPPROFILE"
	memLinePrefix = "membench: "
)

// TestMemoryBenchHelper is a helper process of BenchmarkMemoryAtScale, not a
// test: it syncs its caches, prints "ready", then for every line on stdin
// collects garbage, returns freed memory to the OS and prints its heap.
func TestMemoryBenchHelper(t *testing.T) {
	role := os.Getenv(memRoleEnv)
	if role == "" {
		t.Skip("helper process of BenchmarkMemoryAtScale")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(memKubeconfigEnv))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	cfg.WarningHandler = rest.NoWarnings{} // v1 Endpoints is deprecated: once per request
	ctx := t.Context()
	switch role {
	case "baseline":
		f := informers.NewSharedInformerFactory(kubernetes.NewForConfigOrDie(cfg), 0)
		synced := []cache.InformerSynced{
			f.Core().V1().Services().Informer().HasSynced, f.Core().V1().Endpoints().Informer().HasSynced,
			f.Discovery().V1().EndpointSlices().Informer().HasSynced, f.Core().V1().Nodes().Informer().HasSynced,
		}
		f.Start(ctx.Done())
		defer f.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			t.Fatal("baseline informers did not sync")
		}
	case "wrapper":
		srv, err := wrapper.New(wrapper.Options{NodeName: os.Getenv(memNodeEnv), Upstream: cfg})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", os.Getenv(memAddrEnv))
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
		go func() { _ = srv.Run(ctx) }()
		for !srv.Ready() {
			time.Sleep(50 * time.Millisecond)
		}
	default:
		t.Fatalf("unknown role %q", role)
	}
	fmt.Println(memLinePrefix + "ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		runtime.GC()
		debug.FreeOSMemory()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if prefix := os.Getenv(memProfileEnv); prefix != "" {
			writeHeapProfile(t, prefix+"-"+role+".pprof")
		}
		// Heap in use (whole spans: what the process holds) and the live
		// objects in it (what the profile samples).
		fmt.Printf("%sheap %d %d\n", memLinePrefix, m.HeapInuse, m.HeapAlloc)
	}
}

// writeHeapProfile writes the heap profile to path (go tool pprof -sample_index=inuse_space).
func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// memHelper is a running helper process.
type memHelper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startMemHelper(b *testing.B, role string, env ...string) *memHelper {
	b.Helper()
	return startMemHelperOf(b, os.Args[0], role, env...)
}

// startMemHelperOf runs the helper of test binary bin (another build of
// this package's tests, for a before/after comparison in one run).
func startMemHelperOf(b *testing.B, bin, role string, env ...string) *memHelper {
	b.Helper()
	cmd := exec.Command(bin, "-test.run=^TestMemoryBenchHelper$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(append(os.Environ(), memRoleEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	h := &memHelper{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), memLinePrefix); ok {
				h.lines <- l
			}
		}
	}()
	b.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return h
}

func (h *memHelper) expect(b *testing.B, prefix string, timeout time.Duration) string {
	b.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok || !strings.HasPrefix(l, prefix) {
			b.Fatalf("helper %d: got %q (open %v), want %q", h.cmd.Process.Pid, l, ok, prefix)
		}
		return strings.TrimPrefix(l, prefix)
	case <-time.After(timeout):
		b.Fatalf("helper %d: no %q within %s", h.cmd.Process.Pid, prefix, timeout)
	}
	return ""
}

// procMemory returns the RSS and peak RSS of process pid, in bytes.
func procMemory(b *testing.B, pid int) (rss, peak float64) {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == "kB" {
			v, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "VmRSS:":
				rss = v * 1024
			case "VmHWM:":
				peak = v * 1024
			}
		}
	}
	return rss, peak
}

// runWrapperBinary runs a built application-grid-wrapper for node0 on a
// free loopback port, waits until it is ready and kube-proxy-like informers
// have synced through it, and returns its RSS and peak RSS.
func runWrapperBinary(b *testing.B, bin, kubeconfig string) (rss, peak float64) {
	b.Helper()
	port, err := controlplane.FreePort("127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := controlplane.StartProcess("wrapper-binary", exec.Command(bin, "--kubeconfig", kubeconfig,
		"--node-name", "node0", "--bind-address", addr, "--insecure-plain-http"), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop(10 * time.Second)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if exited, err := p.Exited(); exited || time.Now().After(deadline) {
			b.Fatalf("%s not ready (exited %v: %v):\n%s", bin, exited, err, p.LogTail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	startInformers(b, "http://"+addr, protobuf, "node0")
	return procMemory(b, p.PID())
}

// measure collects garbage in the helper and returns its heap in use, its
// RSS and its peak RSS, in bytes; live is the bytes of live objects in the
// heap (0 from a build that does not report it).
func (h *memHelper) measure(b *testing.B) (heap, rss, peak, live float64) {
	b.Helper()
	if _, err := io.WriteString(h.stdin, "gc\n"); err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(h.expect(b, "heap ", time.Minute))
	heap, _ = strconv.ParseFloat(f[0], 64)
	if len(f) > 1 {
		live, _ = strconv.ParseFloat(f[1], 64)
	}
	rss, peak = procMemory(b, h.cmd.Process.Pid)
	return heap, rss, peak, live
}

// populateScale creates nodes nodes in units nodeunits and services
// Services (every other one annotated topologyKeys ["zone1"]), each with one
// EndpointSlice and one v1 Endpoints of perService ready endpoints on random
// nodes, as the EndpointSlice and Endpoints controllers would.
func populateScale(b *testing.B, c kubernetes.Interface, ns string, nodes, units, services, perService int) {
	b.Helper()
	ctx := b.Context()
	for i := range nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node%d", i),
			Labels: map[string]string{gridKey: fmt.Sprintf("nodeunit%d", i%units), "kubernetes.io/hostname": fmt.Sprintf("node%d", i)}}}
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				i := int(next.Add(1)) - 1
				if i >= services {
					return
				}
				if err := createScaleService(ctx, c, rng, ns, i, nodes, perService); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

func createScaleService(ctx context.Context, c kubernetes.Interface, rng *rand.Rand, ns string, i, nodes, perService int) error {
	name := fmt.Sprintf("svc%d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
	if i%2 == 0 {
		svc.Annotations = map[string]string{superedgev1.AnnotationTopologyKeys: `["zone1"]`}
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	port, proto, portName := int32(8080), corev1.ProtocolTCP, "http"
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: portName, Port: port, Protocol: proto}}}}}
	for j := range perService {
		k := i*perService + j
		ip := fmt.Sprintf("10.%d.%d.%d", 64+k/65536, k/256%256, k%256)
		node := fmt.Sprintf("node%d", rng.IntN(nodes))
		pod := fmt.Sprintf("%s-%d", name, j)
		ready, serving, terminating := true, true, false
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}})
		nodeName := node
		ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: ip, NodeName: &nodeName,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}})
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := c.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{})
	return err
}

// measureOldWrapper runs the wrapper helper of another build of this
// package's test binary (bin) the same way and returns its heap and RSS.
func measureOldWrapper(b *testing.B, bin, kubeconfig string) (heap, rss, live float64) {
	b.Helper()
	port, err := controlplane.FreePort("127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env := []string{memKubeconfigEnv + "=" + kubeconfig, memAddrEnv + "=" + addr, memNodeEnv + "=node0"}
	if prefix := os.Getenv(memProfileEnv); prefix != "" {
		env = append(env, memProfileEnv+"="+prefix+"-old")
	}
	h := startMemHelperOf(b, bin, "wrapper", env...)
	h.expect(b, "ready", 5*time.Minute)
	startInformers(b, "http://"+addr, protobuf, "node0")
	heap, rss, _, live = h.measure(b)
	return heap, rss, live
}

// BenchmarkMemoryAtScale measures the wrapper's memory at 10,000 Services /
// 100,000 endpoints (each Service with one EndpointSlice and one v1
// Endpoints of 10 endpoints; half of them topology Services) against a
// baseline process holding plain client-go informers of the same resources,
// in the same run: heap in use after GC and RSS, each as a ratio to the
// baseline (both processes are this test binary). Then the built
// application-grid-wrapper binary, as the DaemonSet runs it: its RSS and
// peak RSS (the start-up lists), which the DaemonSet's request and limit
// must cover; SG_MEMBENCH_OLD_WRAPPER names another build (an older commit)
// to measure the same way, SG_MEMBENCH_OLD_TEST another build of this
// package's test binary whose in-process wrapper is measured against the
// same baseline. A kube-proxy-like client lists and watches
// through each wrapper while it is measured. One iteration.
func BenchmarkMemoryAtScale(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/wrapper-memory.md")
	const (
		perService = 10
		nodes      = 100
		units      = 10
	)
	services := 10000
	if v, err := strconv.Atoi(os.Getenv("SG_MEMBENCH_SERVICES")); err == nil && v > 0 {
		services = v // a quick trial of the benchmark itself
	}
	// Creating the objects takes most of the run: SG_MEMBENCH_KEEP=FILE
	// writes the populated apiserver's kubeconfig path to FILE and keeps the
	// apiserver until FILE is removed; SG_MEMBENCH_REUSE=KUBECONFIG measures
	// against such an apiserver instead of creating one.
	kubeconfig := os.Getenv("SG_MEMBENCH_REUSE")
	var populate time.Duration
	if kubeconfig == "" {
		cp := controlplane.StartForTest(b, controlplane.Options{})
		kubeconfig = cp.Kubeconfig
		cfg := rest.CopyConfig(cp.Config)
		cfg.QPS, cfg.WarningHandler = -1, rest.NoWarnings{}
		admin := kubernetes.NewForConfigOrDie(cfg)
		start := time.Now()
		populateScale(b, admin, "scale", nodes, units, services, perService)
		populate = time.Since(start)
		b.Logf("created %d nodes, %d Services, EndpointSlices and Endpoints with %d endpoints each in %s",
			nodes, services, perService, populate.Round(time.Second))
		if keep := os.Getenv("SG_MEMBENCH_KEEP"); keep != "" {
			if err := os.WriteFile(keep, []byte(kubeconfig+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				for _, err := os.Stat(keep); err == nil; _, err = os.Stat(keep) {
					time.Sleep(time.Second)
				}
			})
		}
	}

	port, err := controlplane.FreePort("127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range b.N {
		start := time.Now()
		base := startMemHelper(b, "baseline", memKubeconfigEnv+"="+kubeconfig)
		base.expect(b, "ready", 5*time.Minute)
		baseSync := time.Since(start)
		start = time.Now()
		wr := startMemHelper(b, "wrapper", memKubeconfigEnv+"="+kubeconfig, memAddrEnv+"="+addr, memNodeEnv+"=node0")
		wr.expect(b, "ready", 5*time.Minute)
		wrapperSync := time.Since(start)
		// kube-proxy's view through the wrapper: list, then watch.
		startInformers(b, "http://"+addr, protobuf, "node0")

		baseHeap, baseRSS, basePeak, baseLive := base.measure(b)
		heap, rss, peak, live := wr.measure(b)
		const mib = 1 << 20
		benchRec.Report(populate.Seconds(), "populate-s")
		benchRec.Report(baseSync.Seconds(), "baseline-sync-s")
		benchRec.Report(wrapperSync.Seconds(), "wrapper-ready-s")
		benchRec.Report(baseHeap/mib, "baseline-heap-MiB")
		benchRec.Report(heap/mib, "wrapper-heap-MiB")
		benchRec.Report(heap/baseHeap, "heap-ratio")
		benchRec.Report(baseLive/mib, "baseline-live-MiB")
		benchRec.Report(live/mib, "wrapper-live-MiB")
		benchRec.Report(live/baseLive, "live-ratio")
		benchRec.Report(baseRSS/mib, "baseline-RSS-MiB")
		benchRec.Report(rss/mib, "wrapper-RSS-MiB")
		benchRec.Report(rss/baseRSS, "RSS-ratio")
		benchRec.Report(basePeak/mib, "baseline-peak-RSS-MiB")
		benchRec.Report(peak/mib, "wrapper-peak-RSS-MiB")
		benchRec.Report(peak/basePeak, "peak-RSS-ratio")
		if old := os.Getenv("SG_MEMBENCH_OLD_TEST"); old != "" {
			oldHeap, oldRSS, oldLive := measureOldWrapper(b, old, kubeconfig)
			benchRec.Report(oldHeap/mib, "old-wrapper-heap-MiB")
			benchRec.Report(oldHeap/baseHeap, "old-heap-ratio")
			if oldLive > 0 {
				benchRec.Report(oldLive/baseLive, "old-live-ratio")
			}
			benchRec.Report(oldRSS/baseRSS, "old-RSS-ratio")
		}

		if os.Getenv("SG_MEMBENCH_SKIP_BINARY") != "" {
			continue // iterating on the in-process wrapper only
		}
		b.Cleanup(testbin.Cleanup)
		bin := testbin.Path(b, "application-grid-wrapper")
		binRSS, binPeak := runWrapperBinary(b, bin, kubeconfig)
		benchRec.Report(binRSS/mib, "binary-RSS-MiB")
		benchRec.Report(binPeak/mib, "binary-peak-RSS-MiB")
		if old := os.Getenv("SG_MEMBENCH_OLD_WRAPPER"); old != "" {
			oldRSS, oldPeak := runWrapperBinary(b, old, kubeconfig)
			benchRec.Report(oldRSS/mib, "old-binary-RSS-MiB")
			benchRec.Report(oldPeak/mib, "old-binary-peak-RSS-MiB")
			benchRec.Report(binRSS/oldRSS, "binary-vs-old-RSS-ratio")
		}
	}
}
