package webhook

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/internal/testnet"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// kubeletNode is a Node as a kubelet writes it: addresses, capacity, the
// images it holds, its conditions.
func kubeletNode(name string, labels map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Allocatable = n.Status.Capacity
	for i := range 30 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/team/image-%02d@sha256:%064d", i, i), fmt.Sprintf("registry.example/team/image-%02d:v1.%d", i, i)},
			SizeBytes: int64(20+i) << 20})
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.1", OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://1.7.0", KernelVersion: "6.1.0", Architecture: "amd64", OperatingSystem: "linux"}
	now := metav1.Now()
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletHasSufficient", Message: "kubelet has sufficient resources"})
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady", Message: "kubelet is posting ready status"})
	return n
}

// BenchmarkAutonomyCost measures what the autonomy webhook costs the
// apiserver, in bytes read from it on the wire, beside a plain Node
// informer (what watching every Node for the rule would cost) over the same
// world and the same time: SG_AUTONOMY_NODES nodes (default 300) in nodeunits
// of 10 with kubelet-shaped status, each posting its status once in the
// window (kubelets do every 5 minutes, or on a change), and an opted-in
// grid. Then one nodeunit fails: the node lifecycle controller's writes
// about its pods (its identity, impersonated: 3 pods per node, each asked
// every 5 s) are reviewed for a minute of the window.
func BenchmarkAutonomyCost(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/autonomy-cost.md")
	nodes := 300
	if v, err := strconv.Atoi(getenv("SG_AUTONOMY_NODES")); err == nil && v > 0 {
		nodes = v
	}
	_, ctx := ktesting.NewTestContext(b)
	cp := controlplane.StartForTest(b, controlplane.Options{
		BeforeControllers: func(ctx context.Context, cfg *rest.Config) error {
			return crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(cfg), time.Minute)
		},
	})
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	grids := versioned.NewForConfigOrDie(cp.Config)
	for i := range nodes {
		n := kubeletNode(fmt.Sprintf("edge-%04d", i), map[string]string{"zone1": fmt.Sprintf("site-%03d", i/10)})
		created, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n.ObjectMeta = created.ObjectMeta
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, &superedgev1.DeploymentGrid{
		ObjectMeta: metav1.ObjectMeta{Name: "dg", Annotations: map[string]string{autonomy.DurationAnnotation: "2h"}},
		Spec: superedgev1.DeploymentGridSpec{GridUniqKey: "zone1", Template: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	// Each client's bytes read from the apiserver on the wire (TLS
	// records, HTTP/2 frames).
	counted := func(w *testnet.WireCount) *rest.Config {
		cfg := rest.CopyConfig(cp.Config)
		cfg.Dial = w.DialContext(&net.Dialer{})
		cfg.QPS, cfg.Burst = -1, 0
		return cfg
	}
	var webhookWire, informerWire testnet.WireCount
	port, err := testnet.FreePort("127.0.0.1", false)
	if err != nil {
		b.Fatal(err)
	}
	opts := DefaultOptions()
	opts.BindAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	opts.URL, opts.SecretNamespace = "https://"+opts.BindAddress, "default"
	whCfg := counted(&webhookWire)
	whCfg.ContentType = "application/vnd.kubernetes.protobuf" // as controller.NewAutonomyWebhook's
	srv, err := New(opts, kubernetes.NewForConfigOrDie(whCfg), versioned.NewForConfigOrDie(whCfg), &record.FakeRecorder{}, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	whCtx, stopWebhook := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(whCtx) }()
	defer func() { stopWebhook(); <-done }()
	informerCfg := counted(&informerWire)
	informerCfg.ContentType = "application/vnd.kubernetes.protobuf"
	factory := informers.NewSharedInformerFactory(kubernetes.NewForConfigOrDie(informerCfg), 0)
	nodeInformer := factory.Core().V1().Nodes().Informer()
	informerCtx, stopInformer := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	defer func() { stopInformer(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.HasSynced) {
		b.Fatal("node informer")
	}
	// Registered: the webhook is called from here on.
	for {
		if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, opts.ConfigurationName, metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)

	b.ResetTimer()
	for range b.N {
		startWebhook, startInformer := webhookWire.Rx.Load(), informerWire.Rx.Load()
		// Steady state: every node posts its status once.
		for i := range nodes {
			n, err := admin.CoreV1().Nodes().Get(ctx, fmt.Sprintf("edge-%04d", i), metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for j := range n.Status.Conditions {
				n.Status.Conditions[j].LastHeartbeatTime = metav1.Now()
			}
			if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(6 * time.Second) // two refreshes
		steadyWebhook, steadyInformer := webhookWire.Rx.Load()-startWebhook, informerWire.Rx.Load()-startInformer

		// One nodeunit fails: its nodes unreachable, the node lifecycle
		// controller's writes about their pods reviewed for a minute.
		failStart := webhookWire.Rx.Load()
		failing := 10
		var pods []*corev1.Pod
		for i := range failing {
			name := fmt.Sprintf("edge-%04d", i)
			n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for j := range n.Status.Conditions {
				if n.Status.Conditions[j].Type == corev1.NodeReady {
					n.Status.Conditions[j].Status, n.Status.Conditions[j].LastTransitionTime = corev1.ConditionUnknown, metav1.Now()
				}
			}
			if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			for k := range 3 {
				p, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-" + strconv.Itoa(k) + "-"},
					Spec:       corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				if p, err = admin.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
					b.Fatal(err)
				}
				pods = append(pods, p)
			}
		}
		asNodeLifecycle := rest.CopyConfig(cp.Config)
		asNodeLifecycle.Impersonate.UserName = "system:serviceaccount:kube-system:node-controller"
		asNodeLifecycle.QPS, asNodeLifecycle.Burst = -1, 0
		lifecycle := kubernetes.NewForConfigOrDie(asNodeLifecycle)
		withheld := 0
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(5 * time.Second) {
			for _, p := range pods {
				q := p.DeepCopy()
				q.Status.Conditions[0].Status = corev1.ConditionFalse
				if _, err := lifecycle.CoreV1().Pods("default").UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
					withheld++
				}
			}
		}
		failWebhook := webhookWire.Rx.Load() - failStart
		benchRec.Report(float64(steadyWebhook)/float64(nodes), "webhook-steady-B/node")
		benchRec.Report(float64(steadyInformer)/float64(nodes), "node-informer-steady-B/node")
		benchRec.Report(float64(failWebhook)/float64(failing), "webhook-failing-B/node/min")
		benchRec.Report(float64(withheld), "writes-withheld")
		b.Logf("%d nodes, each posting its status once: the webhook read %d B from the apiserver (%.1f B/node), a Node informer %d B (%.0f B/node); one nodeunit of %d nodes failing for a minute (%d withheld writes): the webhook read %d B",
			nodes, steadyWebhook, float64(steadyWebhook)/float64(nodes), steadyInformer, float64(steadyInformer)/float64(nodes), failing, withheld, failWebhook)
		// Back to health for the next iteration.
		for _, p := range pods {
			_ = admin.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
		for i := range failing {
			n, err := admin.CoreV1().Nodes().Get(ctx, fmt.Sprintf("edge-%04d", i), metav1.GetOptions{})
			if err == nil {
				for j := range n.Status.Conditions {
					if n.Status.Conditions[j].Type == corev1.NodeReady {
						n.Status.Conditions[j].Status = corev1.ConditionTrue
					}
				}
				_, _ = admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			}
		}
	}
}

func getenv(k string) string { return os.Getenv(k) }
