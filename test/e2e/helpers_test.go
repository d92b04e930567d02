package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// TestMain removes the programs the clusters ran.
func TestMain(m *testing.M) { testbin.Main(m) }

// runTimeout bounds one whole cluster test (start, assertions, teardown).
const runTimeout = 10 * time.Minute

// startCluster builds a cluster for t and tears it down when t ends. The
// returned context ends at the run's deadline.
func startCluster(t *testing.T, opts harness.Options) (context.Context, *harness.Cluster) {
	t.Helper()
	tools := []harness.Tool{harness.ToolIPTables, harness.ToolConntrack}
	if opts.ProxyMode == harness.ProxyModeNFTables {
		tools = append(tools, harness.ToolNFT)
	}
	if opts.Components.CoreDNS {
		tools = append(tools, harness.ToolDig)
	}
	requireHost(t, tools...)
	requireComponents(t, opts.Components)

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	t.Cleanup(cancel)
	c, err := harness.Start(ctx, opts)
	if err != nil {
		if os.Getenv("CI") == "" && strings.Contains(err.Error(), "make k8s-bins") {
			t.Skipf("control-plane binaries missing: %v", err)
		}
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs (dir %s):\n%s", c.Dir, c.Logs(30))
		}
		c.Stop()
		assertTornDown(t, c.Fabric)
	})
	return ctx, c
}

// requireComponents skips (CI unset) or fails (CI=true) when a selected
// program is not in this checkout yet.
func requireComponents(t *testing.T, comps harness.Components) {
	t.Helper()
	var missing []string
	for _, c := range []struct {
		on  bool
		pkg string
	}{{comps.Controller, harness.ControllerPkg}, {comps.Wrapper, harness.WrapperPkg}, {comps.CoreDNS, harness.CoreDNSPkg}} {
		if c.on && !harness.Available(c.pkg) {
			missing = append(missing, c.pkg)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") == "" {
		t.Skipf("not in this checkout yet: %s; CI=true makes this a failure", strings.Join(missing, ", "))
	}
	t.Fatalf("required under CI but missing: %s", strings.Join(missing, ", "))
}

// eventually is the shared bounded poll (at least testwait.Floor).
var eventually = testwait.Eventually

// waitGridPods waits until SuperEdge's demo grids run their demoPodsPerNU
// ready copies in each nodeunit of units and returns the pods; when they do
// not, the failure says how far the chain from grid to ready Pod got (read
// once, at the end: not on every check of the wait).
func waitGridPods(ctx context.Context, t *testing.T, c *harness.Cluster, units map[string]string) []harness.PodInfo {
	t.Helper()
	want := demoPodsPerNU * len(distinct(units))
	var pods []harness.PodInfo
	err := testwait.Until(ctx, 4*time.Minute, "SuperEdge's grids run one copy per nodeunit", func(ctx context.Context) error {
		var err error
		if pods, err = c.Pods(ctx, echoSelector); err != nil {
			return err
		}
		if ready := readyOnly(pods); len(ready) != want {
			return fmt.Errorf("%d ready of %d wanted", len(ready), want)
		}
		return nil
	})
	if err != nil {
		// The run's context may have ended with the wait.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		summary, detail := c.GridChain(cctx)
		t.Fatalf("%v (%s): pods %v; the chain from grid to Pod:\n%s", err, summary, pods, detail)
	}
	return pods
}

// echoDeployment is a plain Deployment of echo pods labelled app=NAME.
func echoDeployment(name string, replicas int32, nodeSelector map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Containers: []corev1.Container{{
						Name: "echo", Image: "e2e/echo",
						Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
					}},
				},
			},
		},
	}
}

// echoService selects app=NAME, port 80 -> 8080.
func echoService(name string, annotations map[string]string, headless bool) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}

// readyPods lists Running+Ready pods matching selector: name -> node.
func readyPods(ctx context.Context, c *harness.Cluster, selector string) (map[string]string, error) {
	list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				out[p.Name] = p.Spec.NodeName
			}
		}
	}
	return out, nil
}

// keys returns m's keys sorted.
func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// reachAll polls from node until every pod in want has answered url, within
// maxRequests requests; it fails on any answer from a pod not in want.
func reachAll(ctx context.Context, n *harness.Node, url string, want map[string]string, maxRequests int) error {
	seen := map[string]bool{}
	for range maxRequests {
		e, err := n.Get(ctx, url)
		if err != nil {
			return err
		}
		if _, ok := want[e.Pod]; !ok {
			return fmt.Errorf("%s: %s answered by %s on %s, outside %v", n.Name, url, e.Pod, e.Node, keys(want))
		}
		seen[e.Pod] = true
		if len(seen) == len(want) {
			return nil
		}
	}
	return fmt.Errorf("%s: %d requests to %s reached only %v of %v", n.Name, maxRequests, url, keys(seen), keys(want))
}

// assertTornDown checks that nothing of the fabric is left: no namespace with
// its prefix, no root-side link.
func assertTornDown(t *testing.T, f *harness.Fabric) {
	t.Helper()
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), f.Prefix+"-") {
		t.Errorf("network namespaces left after Stop:\n%s", out)
	}
	if err := exec.Command("ip", "link", "show", "dev", f.RootLink).Run(); err == nil {
		t.Errorf("root link %s left after Stop", f.RootLink)
	}
}
