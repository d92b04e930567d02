package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// KubeletFieldManager owns the Pod status fields the player writes.
const KubeletFieldManager = "servicegroup-e2e-kubelet"

// defaultPodPort is served when a Pod declares no TCP containerPort.
const defaultPodPort = 8080

// Kubelet plays the kubelet for every node of the fabric, as kwok does: a
// Pod bound to one of its nodes gets a pod IP on that node namespace's lo, an
// echo HTTP server on each TCP containerPort, and a Running/Ready status.
// When the Pod is deleted (gracefully) the server stops, the IP is released
// and the Pod is removed with grace 0, as a kubelet does after its containers
// have stopped.
type Kubelet struct {
	client kubernetes.Interface
	fabric *Fabric
	lister corelisters.PodLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	start  func(<-chan struct{})

	mu      sync.Mutex
	running map[cache.ObjectName]*podSandbox
	ipam    map[string]*podIPAM
}

// podSandbox is one "running" Pod: its address and servers.
type podSandbox struct {
	uid     types.UID
	node    *FabricNode
	ip      net.IP
	servers []*http.Server
}

// NewKubelet watches Pods with spec.nodeName set.
func NewKubelet(client kubernetes.Interface, fabric *Fabric) *Kubelet {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName!=" }),
		informers.WithTransform(stripManagedFields))
	pods := factory.Core().V1().Pods()
	k := &Kubelet{
		client: client,
		fabric: fabric,
		lister: pods.Lister(),
		synced: pods.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "e2e-kubelet"}),
		start:   factory.Start,
		running: map[cache.ObjectName]*podSandbox{},
		ipam:    map[string]*podIPAM{},
	}
	for _, n := range fabric.Nodes {
		k.ipam[n.Name] = newPodIPAM(n.PodCIDR)
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			k.queue.Add(key)
		}
	}
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	return k
}

// Run serves Pods until ctx ends, then stops every pod server and releases
// every pod IP.
func (k *Kubelet) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer k.stopAll(context.WithoutCancel(ctx))
	defer k.queue.ShutDown()
	logger := klog.FromContext(ctx)
	k.start(ctx.Done())
	if !cache.WaitForNamedCacheSyncWithContext(ctx, k.synced) {
		return
	}
	logger.Info("Kubelet player running", "nodes", len(k.fabric.Nodes))
	for range workers {
		go wait.UntilWithContext(ctx, k.worker, time.Second)
	}
	<-ctx.Done()
}

func (k *Kubelet) worker(ctx context.Context) {
	for k.processNext(ctx) {
	}
}

func (k *Kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing pod failed", "pod", key)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func (k *Kubelet) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.FromContext(ctx)
	pod, err := k.lister.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		k.stop(ctx, key)
		return nil
	}
	if err != nil {
		return err
	}
	node := k.fabric.Node(pod.Spec.NodeName)
	if node == nil {
		return nil // bound to a node this fabric does not play
	}
	k.mu.Lock()
	sb := k.running[key]
	k.mu.Unlock()
	if sb != nil && sb.uid != pod.UID {
		k.stop(ctx, key) // same name, new Pod (a StatefulSet replacement)
		sb = nil
	}

	if pod.DeletionTimestamp != nil {
		k.stop(ctx, key)
		uid := pod.UID
		err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	if sb == nil {
		if sb, err = k.startSandbox(ctx, key, pod, node); err != nil {
			return err
		}
		logger.V(2).Info("Pod sandbox started", "pod", klog.KObj(pod), "node", node.Name, "ip", sb.ip)
	}
	if reportedRunning(pod, sb.ip) {
		return nil
	}
	return k.applyRunningStatus(ctx, pod, sb)
}

func (k *Kubelet) startSandbox(ctx context.Context, key cache.ObjectName, pod *corev1.Pod, node *FabricNode) (*podSandbox, error) {
	ip, err := k.ipam[node.Name].allocate()
	if err != nil {
		return nil, fmt.Errorf("pod %s on %s: %w", key, node.Name, err)
	}
	sb := &podSandbox{uid: pod.UID, node: node, ip: ip}
	if err := node.NS.IP(ctx, "addr", "add", ip.String()+"/32", "dev", "lo"); err != nil {
		k.ipam[node.Name].release(ip)
		return nil, err
	}
	for _, port := range podPorts(pod) {
		l, err := node.NS.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(int(port))))
		if err != nil {
			k.teardown(ctx, sb)
			return nil, fmt.Errorf("pod %s: listen: %w", key, err)
		}
		srv := &http.Server{
			Handler:           echoHandler(pod.Name, pod.Namespace, node.Name, ip.String()),
			ReadHeaderTimeout: 5 * time.Second,
		}
		sb.servers = append(sb.servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "Pod server ended", "pod", key)
			}
		}()
	}
	k.mu.Lock()
	k.running[key] = sb
	k.mu.Unlock()
	return sb, nil
}

// stop ends the Pod's servers and releases its IP, if it runs.
func (k *Kubelet) stop(ctx context.Context, key cache.ObjectName) {
	k.mu.Lock()
	sb := k.running[key]
	delete(k.running, key)
	k.mu.Unlock()
	if sb != nil {
		k.teardown(ctx, sb)
		klog.FromContext(ctx).V(2).Info("Pod sandbox stopped", "pod", key, "ip", sb.ip)
	}
}

func (k *Kubelet) teardown(ctx context.Context, sb *podSandbox) {
	for _, srv := range sb.servers {
		_ = srv.Close()
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = sb.node.NS.IP(dctx, "addr", "del", sb.ip.String()+"/32", "dev", "lo")
	k.ipam[sb.node.Name].release(sb.ip)
}

func (k *Kubelet) stopAll(ctx context.Context) {
	k.mu.Lock()
	keys := make([]cache.ObjectName, 0, len(k.running))
	for key := range k.running {
		keys = append(keys, key)
	}
	k.mu.Unlock()
	for _, key := range keys {
		k.stop(ctx, key)
	}
}

// applyRunningStatus writes the status a kubelet writes once every container
// runs and is ready, through the status subresource with server-side apply.
func (k *Kubelet) applyRunningStatus(ctx context.Context, pod *corev1.Pod, sb *podSandbox) error {
	now := metav1.Now()
	status := corev1ac.PodStatus().
		WithPhase(corev1.PodRunning).
		WithHostIP(sb.node.IP.String()).
		WithHostIPs(corev1ac.HostIP().WithIP(sb.node.IP.String())).
		WithPodIP(sb.ip.String()).
		WithPodIPs(corev1ac.PodIP().WithIP(sb.ip.String())).
		WithStartTime(now)
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		status.WithConditions(corev1ac.PodCondition().WithType(t).WithStatus(corev1.ConditionTrue).WithLastTransitionTime(now))
	}
	for _, c := range pod.Spec.Containers {
		status.WithContainerStatuses(corev1ac.ContainerStatus().
			WithName(c.Name).
			WithImage(c.Image).
			WithImageID("e2e://" + c.Image).
			WithContainerID("e2e://" + string(pod.UID) + "/" + c.Name).
			WithReady(true).
			WithStarted(true).
			WithRestartCount(0).
			WithState(corev1ac.ContainerState().WithRunning(corev1ac.ContainerStateRunning().WithStartedAt(now))))
	}
	ac := corev1ac.Pod(pod.Name, pod.Namespace).WithUID(pod.UID).WithStatus(status)
	_, err := k.client.CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: KubeletFieldManager, Force: true})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone or replaced: the next event says what to do
	}
	return err
}

// reportedRunning is true when the Pod's status already says what the
// player would write.
func reportedRunning(pod *corev1.Pod, ip net.IP) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP != ip.String() {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podPorts(pod *corev1.Pod) []int32 {
	seen := map[int32]bool{}
	var ports []int32
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) && p.ContainerPort > 0 && !seen[p.ContainerPort] {
				seen[p.ContainerPort] = true
				ports = append(ports, p.ContainerPort)
			}
		}
	}
	if len(ports) == 0 {
		ports = []int32{defaultPodPort}
	}
	return ports
}

// podIPAM hands out host addresses of one node's pod CIDR (a /24), next-fit
// from the last one handed out, as CNI's host-local IPAM does: a recreated
// Pod gets a new IP, so tests see an IP change reach kube-proxy and DNS.
type podIPAM struct {
	mu   sync.Mutex
	base net.IP
	used [256]bool
	last int
}

func newPodIPAM(podCIDR *net.IPNet) *podIPAM {
	return &podIPAM{base: podCIDR.IP.To4(), last: 1}
}

func (p *podIPAM) allocate() (net.IP, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range 253 { // .2 to .254: .1 reserved, .255 broadcast
		host := 2 + (p.last-2+1+i+253)%253
		if !p.used[host] {
			p.last = host
			p.used[host] = true
			ip := make(net.IP, 4)
			copy(ip, p.base)
			ip[3] = byte(host)
			return ip, nil
		}
	}
	return nil, errors.New("pod CIDR exhausted")
}

func (p *podIPAM) release(ip net.IP) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used[ip.To4()[3]] = false
}

// stripManagedFields keeps cached Pods small.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
