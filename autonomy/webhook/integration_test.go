package webhook

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/autonomy/webhook/review"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testnet"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The node lifecycle timings of this test, scaled down from the defaults
// (grace period 50 s, toleration 300 s) for test time: a node is marked
// unreachable 6 s after its last Lease renewal, and its pods are evicted 8 s
// after the NoExecute taint. The eviction rate is raised from 0.1 to 1 node
// per second per zone, as the taint attempts the webhook denies take their
// zone's turns too (build/README.md, "Autonomy").
const (
	gracePeriod = 6 * time.Second
	toleration  = 8
	evictWindow = gracePeriod + toleration*time.Second
	renewEvery  = time.Second
	testWindow  = 5 * time.Second
)

// TestNodeunitCutOff runs the webhook against a real kube-apiserver and
// kube-controller-manager with every controller (node lifecycle and taint
// eviction as by default, writing as their ServiceAccounts, as kubeadm and
// managed control planes run them). The nodes are played by the test: a
// Lease renewed every second and a Ready status, as a kubelet keeps them;
// cutting a node stops its renewals (real kubelets: test/realnode).
func TestNodeunitCutOff(t *testing.T) {
	t.Parallel() // its own control plane
	_, ctx := ktesting.NewTestContext(t)
	cp := controlplane.StartForTest(t, controlplane.Options{
		ControllerManager: true,
		Controllers:       "*",
		ControllerManagerArgs: []string{
			"--use-service-account-credentials=true",
			"--node-monitor-grace-period=" + gracePeriod.String(),
			"--node-monitor-period=1s",
			"--node-eviction-rate=1",
		},
		APIServerArgs: []string{
			"--default-unreachable-toleration-seconds=" + strconv.Itoa(toleration),
			"--default-not-ready-toleration-seconds=" + strconv.Itoa(toleration),
		},
		CRDs: true,
	})
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	grids := versioned.NewForConfigOrDie(cp.Config)

	nodes := newNodePlayer(kube)
	go nodes.run(ctx)
	// A healthy crowd keeps the zone (no zone labels: one zone) below the
	// node lifecycle controller's unhealthy-zone threshold (55%), under
	// which it stops tainting in a small cluster.
	for i := range 6 {
		nodes.add(ctx, t, fmt.Sprintf("hub%d", i), map[string]string{"zone1": "hub"})
	}
	for name, unit := range map[string]string{"a": "u1", "b": "u1", "c": "u2", "d": "u2", "e": "u3", "f": "u4"} {
		nodes.add(ctx, t, name, map[string]string{"zone1": unit})
	}
	// A node that opts itself in with an annotation on its own Node (a
	// kubelet may set any) and has no grid's key.
	nodes.add(ctx, t, "g", map[string]string{"other": "x"})
	if _, err := kube.CoreV1().Nodes().Patch(ctx, "g", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+autonomy.DurationAnnotation+`":"720h","node.openyurt.io/autonomy-duration":"0"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]types.UID{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		pods[n] = runPod(ctx, t, kube, n)
	}

	// The grid that opts nodeunits of zone1 in, for 10 minutes.
	createOptInGrid(ctx, t, grids)
	opts := localOptions(t)
	opts.DecisionWindow = testWindow
	reg := prometheus.NewRegistry()
	srv, err := New(opts, kube, grids, eventRecorder(ctx, t, kube), reg)
	if err != nil {
		t.Fatal(err)
	}
	var offset atomic.Int64 // the webhook's clock, moved by the expiry check
	srv.now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	webhookCtx, stopWebhook := context.WithCancel(ctx)
	webhookDone := make(chan error, 1)
	go func() { webhookDone <- srv.Run(webhookCtx) }()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			stopWebhook()
			if err := <-webhookDone; err != nil {
				t.Errorf("the webhook: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	testwait.Eventually(ctx, t, 0, "the webhook registered", func(ctx context.Context) error {
		_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, opts.ConfigurationName, metav1.GetOptions{})
		return err
	})
	time.Sleep(2 * time.Second) // the apiserver's webhook informer

	t.Run("a nodeunit cut off keeps its pods, a failed node does not", func(t *testing.T) {
		start := time.Now()
		nodes.cut("a", "b", "c", "g")
		// Three eviction windows with the nodeunit cut off.
		hold := 3*evictWindow + testWindow
		testwait.Eventually(ctx, t, 0, "a and b unreachable", func(ctx context.Context) error {
			return unreachable(ctx, kube, "a", "b")
		})
		for time.Since(start) < hold {
			for _, n := range []string{"a", "b"} {
				if err := keptUp(ctx, kube, n, pods[n]); err != nil {
					t.Fatalf("%s after %s: %v", n, time.Since(start).Round(time.Second), err)
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
		// c failed beside d and g has no autonomous grid: both get the
		// default handling, pods not Ready, then evicted.
		for _, n := range []string{"c", "g"} {
			testwait.Eventually(ctx, t, 0, n+"'s pod evicted", func(ctx context.Context) error { return evicted(ctx, kube, n) })
		}
		gauge := gather(t, reg, "application_grid_controller_autonomy_nodeunit_state", map[string]string{"nodeunit": "u1", "state": "CutOff"})
		if gauge != 1 {
			t.Errorf("nodeunit_state{nodeunit=u1,state=CutOff} = %v, want 1", gauge)
		}
		for _, want := range []struct{ kind, name, reason string }{
			{"Node", "a", ReasonNodeunitCutOff}, {"Node", "b", ReasonNodeunitCutOff},
			{"Pod", "pod-a", ReasonKeptReady}, {"Pod", "pod-b", ReasonKeptReady},
			{"Node", "c", ReasonNodeFailure},
		} {
			testwait.Eventually(ctx, t, 0, want.reason+" Event on "+want.name, func(ctx context.Context) error {
				return hasEvent(ctx, kube, want.kind, want.name, want.reason)
			})
		}

		nodes.reconnect(ctx, t, "a", "b")
		testwait.Eventually(ctx, t, 0, "a and b Ready again", func(ctx context.Context) error { return ready(ctx, kube, "a", "b") })
		for _, n := range []string{"a", "b"} {
			if err := keptUp(ctx, kube, n, pods[n]); err != nil {
				t.Errorf("%s after the reconnect: %v", n, err)
			}
		}
	})

	t.Run("past its autonomy a nodeunit gets the default handling", func(t *testing.T) {
		offset.Store(int64(11 * time.Minute))
		nodes.cut("e")
		testwait.Eventually(ctx, t, 0, "e's pod evicted", func(ctx context.Context) error { return evicted(ctx, kube, "e") })
		testwait.Eventually(ctx, t, 0, ReasonExpired+" Event on e", func(ctx context.Context) error {
			return hasEvent(ctx, kube, "Node", "e", ReasonExpired)
		})
		offset.Store(0)
	})

	t.Run("a webhook that hangs lets the default handling through", func(t *testing.T) {
		stop()
		// Something holds the port and never answers: every call waits for
		// the configured timeout, then is ignored.
		hang, err := net.Listen("tcp", opts.BindAddress)
		if err != nil {
			t.Fatal(err)
		}
		var held sync.WaitGroup
		accepting := make(chan struct{})
		go func() {
			defer close(accepting)
			for {
				c, err := hang.Accept()
				if err != nil {
					return
				}
				held.Go(func() { time.Sleep(3 * opts.Timeout); c.Close() })
			}
		}()
		// The accept loop adds to held: it must have ended before held is
		// waited for (an Add beside a Wait is a race).
		defer func() {
			hang.Close()
			<-accepting
			held.Wait()
		}()
		nodes.cut("f")
		testwait.Eventually(ctx, t, 0, "f's pod evicted", func(ctx context.Context) error { return evicted(ctx, kube, "f") })
	})
}

// nodePlayer plays the kubelets' heartbeats: each node's Lease renewed
// every second until the node is cut.
type nodePlayer struct {
	kube kubernetes.Interface
	mu   sync.Mutex
	on   map[string]bool
}

func newNodePlayer(kube kubernetes.Interface) *nodePlayer {
	return &nodePlayer{kube: kube, on: map[string]bool{}}
}

func (p *nodePlayer) add(ctx context.Context, t *testing.T, name string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	created, err := p.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.postReady(ctx, created); err != nil {
		t.Fatal(err)
	}
	duration := int32(4)
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: created.UID}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: &duration, RenewTime: &now},
	}
	if _, err := p.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.on[name] = true
	p.mu.Unlock()
}

// postReady writes the node's Ready condition as its kubelet does.
func (p *nodePlayer) postReady(ctx context.Context, n *corev1.Node) error {
	now := metav1.Now()
	n = n.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: now, LastTransitionTime: now}}
	_, err := p.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

func (p *nodePlayer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(renewEvery):
		}
		p.mu.Lock()
		var names []string
		for n, on := range p.on {
			if on {
				names = append(names, n)
			}
		}
		p.mu.Unlock()
		for _, n := range names {
			lease, err := p.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				continue
			}
			now := metav1.NewMicroTime(time.Now())
			lease.Spec.RenewTime = &now
			_, _ = p.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{})
		}
	}
}

func (p *nodePlayer) cut(names ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names {
		p.on[n] = false
	}
}

// reconnect renews the nodes' Leases again and posts them Ready, as a
// kubelet does once it reaches the apiserver again.
func (p *nodePlayer) reconnect(ctx context.Context, t *testing.T, names ...string) {
	t.Helper()
	p.mu.Lock()
	for _, n := range names {
		p.on[n] = true
	}
	p.mu.Unlock()
	for _, name := range names {
		testwait.Eventually(ctx, t, 0, name+" posts Ready", func(ctx context.Context) error {
			n, err := p.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return p.postReady(ctx, n)
		})
	}
}

// runPod makes pod-<node> on node, Running and Ready as its kubelet reports.
func runPod(ctx context.Context, t *testing.T, kube kubernetes.Interface, node string) types.UID {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + node, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	created, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	created.Status.Phase = corev1.PodRunning
	created.Status.PodIP = "10.244.0.1"
	created.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	if _, err := kube.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return created.UID
}

// keptUp: node's pod is the same pod, Ready, not being deleted, and the node
// carries no NoExecute taint.
func keptUp(ctx context.Context, kube kubernetes.Interface, node string, uid types.UID) error {
	p, err := kube.CoreV1().Pods("default").Get(ctx, "pod-"+node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	switch {
	case p.UID != uid:
		return fmt.Errorf("pod-%s was replaced", node)
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("pod-%s is being deleted", node)
	case readyStatus(p) != corev1.ConditionTrue:
		return fmt.Errorf("pod-%s is not Ready", node)
	}
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, taint := range n.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoExecute {
			return fmt.Errorf("node %s has taint %s:%s", node, taint.Key, taint.Effect)
		}
	}
	return nil
}

func evicted(ctx context.Context, kube kubernetes.Interface, node string) error {
	p, err := kube.CoreV1().Pods("default").Get(ctx, "pod-"+node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.DeletionTimestamp == nil {
		return fmt.Errorf("pod-%s not evicted (Ready %s)", node, readyStatus(p))
	}
	return nil
}

// readyStatus is the status of p's Ready condition, "" without one.
func readyStatus(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

func unreachable(ctx context.Context, kube kubernetes.Interface, names ...string) error {
	for _, name := range names {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !autonomy.NodeOf(n).Unreachable {
			return fmt.Errorf("%s is not unreachable yet", name)
		}
	}
	return nil
}

func ready(ctx context.Context, kube kubernetes.Interface, names ...string) error {
	for _, name := range names {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return fmt.Errorf("%s is Ready %s", name, c.Status)
			}
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == review.UnreachableTaint {
				return fmt.Errorf("%s still has %s:%s", name, taint.Key, taint.Effect)
			}
		}
	}
	return nil
}

func hasEvent(ctx context.Context, kube kubernetes.Interface, kind, name, reason string) error {
	events, err := kube.CoreV1().Events("").List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		return err
	}
	if len(events.Items) == 0 {
		return fmt.Errorf("no %s Event on %s %s", reason, kind, name)
	}
	return nil
}

// gather returns the value of the series of metric name with labels.
func gather(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return 0
}

// createOptInGrid creates the DeploymentGrid "dg" that opts the nodeunits
// of zone1 in for 10 minutes.
func createOptInGrid(ctx context.Context, t *testing.T, grids versioned.Interface) {
	t.Helper()
	dg := &superedgev1.DeploymentGrid{
		ObjectMeta: metav1.ObjectMeta{Name: "dg", Namespace: "default", Annotations: map[string]string{autonomy.DurationAnnotation: "10m"}},
		Spec: superedgev1.DeploymentGridSpec{GridUniqKey: "zone1", Template: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			},
		}},
	}
	if _, err := grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, dg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// localOptions are the webhook's defaults serving on a free loopback port,
// with its certificate Secret in "default".
func localOptions(t *testing.T) Options {
	t.Helper()
	port, err := testnet.FreePort("127.0.0.1", false)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.BindAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	opts.URL = "https://" + opts.BindAddress
	opts.SecretNamespace = "default"
	return opts
}

// eventRecorder records Events into the apiserver as the controller does.
func eventRecorder(ctx context.Context, t *testing.T, kube kubernetes.Interface) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	t.Cleanup(broadcaster.Shutdown)
	return broadcaster.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "application-grid-controller"})
}
