package gridhosts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// benchWorld is the world the DNS benchmarks serve: StatefulSetGrid
// statefulsetgrid-demo (key zone1) and its Service servicegrid-demo-svc in
// nodeunit1 (node-1) and nodeunit2 (node-2), with pods pods per nodeunit;
// node-1's unified names answer nodeunit1's pods, whose ordinal i has
// address memoryPodIP(i) (nodeunit2's, foreignPodIP(i)).
type benchWorld struct {
	c *cluster
	// controllers: the children, their pods and the Service were made by
	// the real controllers (SG_BENCH_WORLD=controllers), else by the
	// benchmark itself.
	controllers bool
	grid        *superedgev1.StatefulSetGrid
	pods        int
	names       []string              // node-1's unified names, ordinal order
	running     func() int            // controllers: pods running with an address
	retried     func() int64          // controllers: writes playing kubelet retried
	controller  *controlplane.Process // controllers: the application-grid-controller
	stops       []func()              // what stop does, in reverse
}

// benchWorldKind is SG_BENCH_WORLD: "controllers" (default) or "direct".
func benchWorldKind(b *testing.B) bool {
	switch v := os.Getenv("SG_BENCH_WORLD"); v {
	case "", "controllers":
		return true
	case "direct":
		return false
	default:
		b.Fatalf("SG_BENCH_WORLD=%q: want controllers or direct", v)
		return false
	}
}

// startBenchWorld builds a world for b alone, stopped when b ends.
func startBenchWorld(b *testing.B, pods int, controllers bool) *benchWorld {
	b.Helper()
	w := buildBenchWorld(b, pods, controllers)
	b.Cleanup(func() {
		w.logEnd(b)
		w.stop()
	})
	return w
}

// sharedWorld is the world benchmarks of this process share (nil until one
// asks): BenchmarkDNSPerf and BenchmarkMemory at 10k names each built the
// same one, 4 minutes of a loaded 2-core machine apiece. TestMain stops it.
var sharedWorld *benchWorld

// sharedBenchWorld returns the shared world with pods pods per nodeunit,
// made by the controllers or not: the one already built when it is of that
// kind and no larger (a smaller one grows, as BenchmarkMemory's sizes do),
// else a new one in its place. Only benchmarks that change nothing in it
// share it, so each reads the same objects as in a world of its own. A
// benchmark that fails stops it: the next one builds a fresh one.
func sharedBenchWorld(b *testing.B, pods int, controllers bool) *benchWorld {
	b.Helper()
	if w := sharedWorld; w != nil && (w.controllers != controllers || w.pods > pods) {
		stopSharedWorld()
	}
	if sharedWorld == nil {
		sharedWorld = buildBenchWorld(b, pods, controllers)
	} else {
		b.Logf("world: %d pods per nodeunit (made by: %s), shared with an earlier benchmark of this process", sharedWorld.pods, sharedWorld.kind())
		sharedWorld.scale(b, pods)
	}
	w := sharedWorld
	b.Cleanup(func() {
		w.logEnd(b)
		if b.Failed() && sharedWorld == w {
			stopSharedWorld()
		}
	})
	return w
}

// stopSharedWorld stops the shared world, if one was built.
func stopSharedWorld() {
	if sharedWorld != nil {
		sharedWorld.stop()
		sharedWorld = nil
	}
}

// buildBenchWorld builds the world with pods pods per nodeunit; its
// processes run until stop. With
// controllers it runs the application-grid-controller (children and their
// Service, as a cluster would get them) and kube-controller-manager (its
// StatefulSet controller makes the pods from the grid's template, Parallel
// pod management), and plays scheduler and kubelet for the pods (bound to
// the node their nodeSelector names, reported Running and Ready with their
// address), as the other tests here do; else it creates the children and
// the pods itself, status filled.
func buildBenchWorld(b *testing.B, pods int, controllers bool) (w *benchWorld) {
	b.Helper()
	w = &benchWorld{controllers: controllers}
	built := false
	defer func() {
		if !built { // b.Fatal or b.Skip ended the build: stop what it started
			w.stop()
		}
	}()
	opts := controlplane.Options{CRDs: true}
	if controllers {
		// The StatefulSet controller writes each pod through
		// kube-controller-manager's client: its default 20 queries per
		// second would take 17 minutes for 20k pods.
		opts.ControllerManager = true
		opts.ControllerManagerArgs = []string{"--kube-api-qps=500", "--kube-api-burst=1000"}
	}
	w.startCluster(b, opts)
	c := w.c
	ctx := context.Background()
	for i := 1; i <= 2; i++ {
		must(c.kube.CoreV1().Nodes().Create(ctx, newNode(fmt.Sprintf("node-%d", i),
			map[string]string{"zone1": fmt.Sprintf("nodeunit%d", i)}, ""), metav1.CreateOptions{}))(b)
	}
	grid := newGrid("default", "statefulsetgrid-demo", "zone1", "")
	grid.Spec.Template.ServiceName = demoSvc
	grid.Spec.Template.Replicas = ptr.To(int32(pods))
	grid.Spec.Template.PodManagementPolicy = appsv1.ParallelPodManagement
	if !controllers {
		w.grid = must(c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx, grid, metav1.CreateOptions{}))(b)
		must(c.kube.CoreV1().Services("default").Create(ctx, newService("default", demoSvc, "zone1", false), metav1.CreateOptions{}))(b)
		for u := 1; u <= 2; u++ {
			must(c.kube.AppsV1().StatefulSets("default").Create(ctx,
				newSet(w.grid, fmt.Sprintf("nodeunit%d", u), demoSvc, "", int32(pods)), metav1.CreateOptions{}))(b)
		}
		w.scale(b, pods)
		built = true
		return w
	}

	var stopPlaying func()
	w.running, w.retried, stopPlaying = playPods(b, c)
	w.onStop(stopPlaying)
	health := controlplane.FreeAddress(b)
	var err error
	w.controller, err = controlplane.StartProcess("application-grid-controller", exec.Command(testbin.Path(b, "application-grid-controller"),
		"--kubeconfig="+c.cp.Kubeconfig, "--leader-elect=false", "--manage-crds=false",
		"--metrics-bind-address=0", "--health-bind-address="+health), c.cp.Dir)
	if err != nil {
		b.Fatal(err)
	}
	w.onStop(func() { w.controller.Stop(10 * time.Second) })
	sg := &superedgev1.ServiceGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: strings.TrimSuffix(demoSvc, "-svc")},
		Spec: superedgev1.ServiceGridSpec{GridUniqKey: "zone1", Template: corev1.ServiceSpec{
			Selector: map[string]string{"app": grid.Name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		}},
	}
	must(c.grids.SuperedgeV1().ServiceGrids("default").Create(ctx, sg, metav1.CreateOptions{}))(b)
	grid.Spec.Template.Replicas = ptr.To(int32(0))
	w.grid = must(c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx, grid, metav1.CreateOptions{}))(b)
	w.scale(b, pods)
	built = true
	return w
}

// startCluster starts the world's control plane (kube-apiserver, etcd, the
// CRDs installed, and what opts add), stopped by stop; without the
// binaries it skips b, or fails it under CI, as StartForTest does.
func (w *benchWorld) startCluster(b *testing.B, opts controlplane.Options) {
	b.Helper()
	controlplane.BinaryForTest(b, controlplane.KubeAPIServer)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		b.Fatalf("start control plane: %v", err)
	}
	w.onStop(cp.Stop)
	w.c = &cluster{kube: kubernetes.NewForConfigOrDie(cp.Config), grids: versioned.NewForConfigOrDie(cp.Config), cp: cp}
}

// logEnd logs, as b ends, the writes playing kubelet retried and, when b
// failed, the end of the control plane's and the controller's logs.
func (w *benchWorld) logEnd(b *testing.B) {
	if w.retried != nil {
		if n := w.retried(); n > 0 {
			b.Logf("playing scheduler and kubelet: %d writes retried", n)
		}
	}
	if !b.Failed() {
		return
	}
	b.Logf("control plane logs:\n%s", w.c.cp.Logs(40))
	if w.controller != nil {
		b.Logf("----- application-grid-controller log -----\n%s", w.controller.LogTail(100))
	}
}

// onStop adds f to what stop does, after what was added later.
func (w *benchWorld) onStop(f func()) { w.stops = append(w.stops, f) }

// stop ends the world's processes, the last started first.
func (w *benchWorld) stop() {
	for i := len(w.stops) - 1; i >= 0; i-- {
		w.stops[i]()
	}
	w.stops = nil
}

// scale makes the world pods pods per nodeunit and waits until every one
// of them has its address; the names grow with it.
func (w *benchWorld) scale(b *testing.B, pods int) {
	b.Helper()
	if pods == w.pods {
		return
	}
	ctx := context.Background()
	start := time.Now()
	if !w.controllers {
		for u := 1; u <= 2; u++ {
			set := must(w.c.kube.AppsV1().StatefulSets("default").Get(ctx, fmt.Sprintf("statefulsetgrid-demo-nodeunit%d", u), metav1.GetOptions{}))(b)
			if *set.Spec.Replicas != int32(pods) {
				set.Spec.Replicas = ptr.To(int32(pods))
				set = must(w.c.kube.AppsV1().StatefulSets("default").Update(ctx, set, metav1.UpdateOptions{}))(b)
			}
			createPodsConcurrently(b, w.c, set, fmt.Sprintf("node-%d", u), []func(int) string{memoryPodIP, foreignPodIP}[u-1], w.pods, pods)
		}
	} else {
		grid := must(w.c.grids.SuperedgeV1().StatefulSetGrids("default").Get(ctx, w.grid.Name, metav1.GetOptions{}))(b)
		if *grid.Spec.Template.Replicas != int32(pods) {
			grid.Spec.Template.Replicas = ptr.To(int32(pods))
			must(w.c.grids.SuperedgeV1().StatefulSetGrids("default").Update(ctx, grid, metav1.UpdateOptions{}))(b)
		}
		w.waitQuiet(b, pods)
	}
	for i := w.pods; i < pods; i++ {
		w.names = append(w.names, fmt.Sprintf("statefulsetgrid-demo-%d.%s.default.svc.cluster.local.", i, demoSvc))
	}
	w.pods = pods
	b.Logf("world: %d pods per nodeunit (made by: %s) in %v", pods, w.kind(), time.Since(start).Round(time.Second))
}

// kind names who made the world, for the records.
func (w *benchWorld) kind() string {
	if w.controllers {
		return "controllers"
	}
	return "direct"
}

// waitQuiet waits until pods pods per nodeunit run with an address and
// both StatefulSets report them ready at their current generation: from
// then on nothing changes while the benchmark measures.
func (w *benchWorld) waitQuiet(b *testing.B, pods int) {
	b.Helper()
	poll(b, 60*time.Minute, fmt.Sprintf("%d pods per nodeunit running and their StatefulSets settled", pods), func() error {
		if n := w.running(); n != 2*pods {
			return fmt.Errorf("%d of %d pods running", n, 2*pods)
		}
		for u := 1; u <= 2; u++ {
			s, err := w.c.kube.AppsV1().StatefulSets("default").Get(context.Background(), fmt.Sprintf("statefulsetgrid-demo-nodeunit%d", u), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.Status.ObservedGeneration != s.Generation || s.Status.ReadyReplicas != int32(pods) || s.Status.Replicas != int32(pods) {
				return fmt.Errorf("%s: generation %d observed %d, %d of %d ready", s.Name, s.Generation, s.Status.ObservedGeneration, s.Status.ReadyReplicas, pods)
			}
		}
		return nil
	})
}

// hostsFile is the hosts file of node-1's names, as the
// statefulset-grid-daemon wrote it.
func (w *benchWorld) hostsFile(b *testing.B) string {
	b.Helper()
	var text strings.Builder
	for i, name := range w.names {
		fmt.Fprintf(&text, "%s %s\n", memoryPodIP(i), name)
	}
	path := b.TempDir() + "/hosts"
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// playPods plays kube-scheduler and kubelet for every pod until stop, and
// returns how many pods run with an address (its informer's count) and how
// many of its writes were retried: a
// pod without a node is bound to the node its nodeSelector names (node-1
// for zone1=nodeunit1, node-2 for nodeunit2); a bound pod without an
// address is reported Running and Ready with its nodeunit's address for
// its ordinal. Eight workers, as a node's kubelet and the scheduler run
// beside each other.
func playPods(b *testing.B, c *cluster) (running func() int, retried func() int64, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace("default"))
	pods := factory.Core().V1().Pods()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "bench-pods"})
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && (p.Spec.NodeName == "" || p.Status.PodIP == "") && p.DeletionTimestamp == nil {
			queue.Add(cache.ObjectName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	var failures atomic.Int64
	play := func(key cache.ObjectName) error {
		p, err := pods.Lister().Pods(key.Namespace).Get(key.Name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		unit := p.Spec.NodeSelector["zone1"]
		node := "node-" + strings.TrimPrefix(unit, "nodeunit")
		switch {
		case p.DeletionTimestamp != nil:
			return nil
		case p.Spec.NodeName == "":
			if unit == "" {
				return nil
			}
			err = c.kube.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			}, metav1.CreateOptions{})
		case p.Status.PodIP == "":
			ord, err := strconv.Atoi(p.Name[strings.LastIndexByte(p.Name, '-')+1:])
			if err != nil {
				return nil
			}
			ip := memoryPodIP(ord)
			if p.Spec.NodeName == "node-2" {
				ip = foreignPodIP(ord)
			}
			p = p.DeepCopy()
			setPodIPs(p, ip)
			_, err = c.kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // a newer version is on its way through the informer
		}
		return err
	}
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := play(key); err != nil && ctx.Err() == nil {
					failures.Add(1)
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}
	factory.Start(ctx.Done())
	stop = func() {
		cancel()
		queue.ShutDown()
		for range 8 {
			<-done
		}
		factory.Shutdown()
	}
	running = func() int {
		n := 0
		for _, obj := range pods.Informer().GetStore().List() {
			if p := obj.(*corev1.Pod); p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				n++
			}
		}
		return n
	}
	return running, failures.Load, stop
}
