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
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/controller"
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
// heartbeat times, addresses, capacity, node info and a list of images
// (about 5 KB of JSON, most of a real Node's size).
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
	for k := range 16 {
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
func kubeProxyInformers(tb testing.TB, cfg *rest.Config, node string) func() bool {
	tb.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf + ",application/json"
	c := kubernetes.NewForConfigOrDie(cfg)
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = kubeProxySelector
	}))
	nf := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + node
	}))
	synced := []cache.InformerSynced{
		f.Core().V1().Services().Informer().HasSynced,
		f.Discovery().V1().EndpointSlices().Informer().HasSynced,
		nf.Core().V1().Nodes().Informer().HasSynced,
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() { cancel(); f.Shutdown(); nf.Shutdown() })
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	return func() bool {
		for _, s := range synced {
			if !s() {
				return false
			}
		}
		return true
	}
}

// fleetPod creates pod name of app on node and reports it ready at ip.
func fleetPod(tb testing.TB, c kubernetes.Interface, ns, app, name, node, ip string, at time.Time) {
	tb.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Image: "example.invalid/echo:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(tb.Context(), pod, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	now := at.UTC().Format(time.RFC3339)
	status := fmt.Sprintf(`{"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}],"conditions":[`+
		`{"type":"Ready","status":"True","lastTransitionTime":%q},{"type":"ContainersReady","status":"True","lastTransitionTime":%q}]}}`,
		ip, ip, now, now)
	if _, err := c.CoreV1().Pods(ns).Patch(tb.Context(), name, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkFleet: one real kube-apiserver with kube-controller-manager's
// endpointslice and endpoints controllers, SG_FLEET_NODES (300) Nodes in 6
// nodeunits with kubelet-sized status, 100 topology Services with 2 ready
// pods each (slices made by the controller), the application-grid-
// controller's summary writer, and SG_FLEET_WRAPPERS (50) real wrappers,
// each for its own node in nodeunits 0-4, next to as many kube-proxy-shaped
// informer sets pointed straight at the apiserver for the same nodes. Per
// kind of event it reports the bytes each edge node received from the
// apiserver: the wrapper's upstream and kube-proxy's, and their ratio.
func BenchmarkFleet(b *testing.B) {
	nodesN, wrappersN := envInt("SG_FLEET_NODES", 300), envInt("SG_FLEET_WRAPPERS", 50)
	const units, servicesN, churn = 6, 100, 20
	cp := controlplane.StartForTest(b, controlplane.Options{
		ControllerManager: true,
		Controllers:       "endpointslice-controller,endpoints-controller",
	})
	ctx := b.Context()
	admin := adminClient(cp)
	if err := controller.EnsureCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		b.Fatal(err)
	}
	nodeName := func(i int) string { return fmt.Sprintf("fleet%03d", i) }
	unitOf := func(i int) int { return i % units }
	parallel := func(n int, f func(i int)) {
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
	beat := time.Now()
	parallel(nodesN, func(i int) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{
			gridKey: fmt.Sprintf("unit-%d", unitOf(i)), "kubernetes.io/hostname": nodeName(i), "kubernetes.io/os": "linux",
			"kubernetes.io/arch": "arm64", "node.kubernetes.io/instance-type": "edge-small", "topology.kubernetes.io/zone": fmt.Sprintf("z%d", unitOf(i)),
		}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			b.Error(err)
			return
		}
		if _, err := admin.CoreV1().Nodes().PatchStatus(ctx, n.Name, fleetNodeStatus(i, beat)); err != nil {
			b.Error(err)
		}
	})
	ns := "fleet"
	createNamespace(b, admin, ns)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	readyAt := time.Now().Add(-24 * time.Hour)
	var atMu sync.Mutex
	next := func() time.Time {
		atMu.Lock()
		defer atMu.Unlock()
		readyAt = readyAt.Add(time.Second)
		return readyAt
	}
	parallel(servicesN, func(k int) {
		name := fmt.Sprintf("s%03d", k)
		createService(b, admin, ns, name, `["zone1"]`)
		setSelector(b, admin, ns, name, map[string]string{"app": name})
		for j := range 2 {
			node := (k*7 + j*13) % nodesN
			fleetPod(b, admin, ns, name, fmt.Sprintf("%s-%d", name, j), nodeName(node), fmt.Sprintf("10.30.%d.%d", k, j+1), next())
		}
	})
	addresses := func(ctx context.Context) int {
		l, err := admin.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return -1
		}
		n := 0
		for _, sl := range l.Items {
			for _, e := range sl.Endpoints {
				n += len(e.Addresses)
			}
		}
		return n
	}
	eventually(b, "the endpointslice controller lists every pod", 5*time.Minute, func(ctx context.Context) (bool, error) {
		return addresses(ctx) == 2*servicesN, nil
	})
	runController(b, cp.Config)
	eventually(b, "node label summaries of every node", 5*time.Minute, func(ctx context.Context) (bool, error) {
		return summarised(ctx, nodesFunc(func() ([]corev1.Node, error) {
			l, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		}), versioned.NewForConfigOrDie(cp.Config), gridKey)
	})

	// Edge nodes: the first wrappersN nodes outside nodeunit 5.
	var edge []int
	for i := 0; i < nodesN && len(edge) < wrappersN; i++ {
		if unitOf(i) != units-1 {
			edge = append(edge, i)
		}
	}
	viaWrapper := make([]*byteCounter, len(edge))
	direct := make([]*byteCounter, len(edge))
	var directSynced []func() bool
	for x, i := range edge {
		viaWrapper[x] = &byteCounter{bytes: map[string]int64{}}
		startWrapper(b, cp, nodeName(i), "", wrapper.Options{Upstream: viaWrapper[x].wrap(cp.Config)})
		direct[x] = &byteCounter{bytes: map[string]int64{}}
		directSynced = append(directSynced, kubeProxyInformers(b, direct[x].wrap(cp.Config), nodeName(i)))
	}
	eventually(b, "kube-proxy-shaped informers synced", 5*time.Minute, func(context.Context) (bool, error) {
		for _, s := range directSynced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
	total := func(cs []*byteCounter) int64 {
		var n int64
		for _, c := range cs {
			for _, k := range []string{"nodes", "node", "summaries", "endpoints", "other"} {
				n += c.get(k)
			}
		}
		return n
	}
	// settle waits until the counters have moved by no more than BOOKMARKs
	// (a few hundred bytes a second across hundreds of watches) for 3s:
	// every edge node has received what the changes sent it.
	settle := func() {
		last, still := int64(-1), 0
		for still < 6 {
			time.Sleep(500 * time.Millisecond)
			cur := total(viaWrapper) + total(direct)
			if last >= 0 && cur-last < 4096 {
				still++
			} else {
				still = 0
			}
			last = cur
		}
	}
	settle()
	perNode := func(cs []*byteCounter) float64 { return float64(total(cs)) / float64(len(cs)) }
	b.Logf("%d nodes, %d Services, %d edge nodes (2026 run)", nodesN, servicesN, len(edge))
	report := func(kind string, events int, change func()) {
		w0, d0 := perNode(viaWrapper), perNode(direct)
		change()
		settle()
		w, d := (perNode(viaWrapper)-w0)/float64(events), (perNode(direct)-d0)/float64(events)
		ratio := 0.0
		if d > 0 {
			ratio = w / d
		}
		b.Logf("%-45s kube-proxy direct %8.0f B   wrapper upstream %8.0f B   ratio %.2f", kind, d, w, ratio)
		unit := strings.ReplaceAll(kind, " ", "-")
		b.ReportMetric(d, "direct-B/"+unit)
		b.ReportMetric(w, "wrapper-B/"+unit)
	}
	b.Logf("%-45s kube-proxy direct %8.0f B   wrapper upstream %8.0f B   ratio %.2f", "initial sync per edge node", perNode(direct), perNode(viaWrapper), perNode(viaWrapper)/perNode(direct))
	b.ReportMetric(perNode(direct), "direct-B/initial-sync")
	b.ReportMetric(perNode(viaWrapper), "wrapper-B/initial-sync")

	for range b.N {
		// Another node's status report: every node outside the edge set reports once.
		report("another node's status report", nodesN-len(edge), func() {
			beat = beat.Add(10 * time.Second)
			parallel(nodesN, func(i int) {
				if slices.Contains(edge, i) {
					return
				}
				if _, err := admin.CoreV1().Nodes().PatchStatus(ctx, nodeName(i), fleetNodeStatus(i, beat)); err != nil {
					b.Error(err)
				}
			})
		})
		report("a non-topology label change on another node", churn, func() {
			for k := range churn {
				patch := fmt.Sprintf(`{"metadata":{"labels":{"example.com/rack":"r%d"}}}`, k)
				if _, err := admin.CoreV1().Nodes().Patch(ctx, nodeName(units-1+(k%(nodesN/units))*units), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		want := 2 * servicesN
		report("an endpoint change in another nodeunit", churn, func() {
			for k := range churn {
				// Pods on nodes of nodeunit 5, which holds no edge node.
				node := units - 1 + ((k*5)%(nodesN/units))*units
				want++
				fleetPod(b, admin, ns, fmt.Sprintf("s%03d", k), fmt.Sprintf("s%03d-f%d", k, want), nodeName(node),
					fmt.Sprintf("10.31.%d.%d", want/250, want%250), next())
				eventually(b, "the controller's slice lists the pod", 2*time.Minute, func(ctx context.Context) (bool, error) {
					return addresses(ctx) == want, nil
				})
			}
		})
		report("a Service change", churn, func() {
			for k := range churn {
				patch := fmt.Sprintf(`{"metadata":{"labels":{"example.com/revision":"r%d"}}}`, time.Now().UnixNano())
				if _, err := admin.CoreV1().Services(ns).Patch(ctx, fmt.Sprintf("s%03d", k), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
