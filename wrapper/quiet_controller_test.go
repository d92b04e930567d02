package wrapper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// TestQuietForControllerMadeSlices is TestQuietForForeignChanges on the
// EndpointSlices kube-controller-manager's endpointslice controller makes
// from pods, annotations and all: it rewrites last-change-trigger-time with
// every update, so pods becoming ready in another nodeunit change every
// slice upstream while node0's served form, and so its kube-proxy, must not
// change. The last pod, on node0, is the sentinel.
func TestQuietForControllerMadeSlices(t *testing.T) {
	t.Parallel() // its own control plane
	const foreignChanges = 5
	ns := "quiet-kcm"
	cp, admin := startQuietService(t, ns)
	// Pods become ready a minute apart, each stamped by its kubelet, so
	// every slice update carries a new trigger time.
	readyAt := time.Now().Add(-time.Hour)
	next := func() time.Time { readyAt = readyAt.Add(time.Minute); return readyAt }
	readyPod(t, admin, ns, "quiet", "local-0", "node0", "10.4.0.1", next())
	readyPod(t, admin, ns, "quiet", "foreign-0", "node1", "10.4.0.2", next())
	eventually(t, "the endpointslice controller's slice lists both pods", convergeFloor, func(ctx context.Context) (bool, error) {
		return sliceAddresses(ctx, admin, ns, "svc") == 2, nil
	})

	w := startWrapper(t, cp, "node0", "", wrapper.Options{})
	through := clientFor(t, w.URL(), protobuf)
	upstream := watchSlicesFrom(t, admin.DiscoveryV1().EndpointSlices(ns))
	served := watchSlicesFrom(t, through.DiscoveryV1().EndpointSlices(ns))

	for i := range foreignChanges {
		readyPod(t, admin, ns, "quiet", fmt.Sprintf("foreign-%d", i+1), "node1", fmt.Sprintf("10.4.1.%d", i+1), next())
		// One slice write per change.
		want := 3 + i
		eventually(t, fmt.Sprintf("%d addresses upstream", want), convergeFloor, func(ctx context.Context) (bool, error) {
			return sliceAddresses(ctx, admin, ns, "svc") == want, nil
		})
	}
	readyPod(t, admin, ns, "quiet", "local-1", "node0", "10.4.2.1", next()) // the sentinel

	up, down := eventsUntil(t, upstream, "10.4.2.1"), eventsUntil(t, served, "10.4.2.1")
	t.Logf("events for %d foreign-nodeunit pods and 1 local one, slices by kube-controller-manager: apiserver %d, wrapper for node0 %d", foreignChanges, up, down)
	if up < foreignChanges+1 || down != 1 {
		t.Fatalf("apiserver sent %d events, the wrapper %d; want at least %d and 1", up, down, foreignChanges+1)
	}
	// The case at hand: the controller stamped its trigger time.
	l, err := admin.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=svc"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range l.Items {
		if _, ok := sl.Annotations[corev1.EndpointsLastChangeTriggerTime]; !ok {
			t.Fatalf("slice %s carries no %s: %v", sl.Name, corev1.EndpointsLastChangeTriggerTime, sl.Annotations)
		}
	}
}

// convergeFloor bounds a wait for the controller; a passing test returns as
// soon as the state is there.
const convergeFloor = 2 * time.Minute

func setSelector(t testing.TB, c kubernetes.Interface, ns, name string, sel map[string]string) {
	t.Helper()
	svc, err := c.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = sel
	if _, err := c.CoreV1().Services(ns).Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startQuietService starts a control plane whose kube-controller-manager
// makes EndpointSlices from pods, with the test nodes and, in namespace ns,
// Service svc (topologyKeys zone1) selecting app=quiet.
func startQuietService(t testing.TB, ns string) (*controlplane.ControlPlane, kubernetes.Interface) {
	t.Helper()
	cp := controlplane.StartForTest(t, controlplane.Options{
		ControllerManager: true,
		Controllers:       "endpointslice-controller,endpoints-controller",
	})
	admin := adminClient(cp)
	createNodes(t, admin)
	createNamespace(t, admin, ns)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createService(t, admin, ns, "svc", `["zone1"]`)
	setSelector(t, admin, ns, "svc", map[string]string{"app": "quiet"})
	return cp, admin
}

// readyPod creates pod name of app on node and reports it running and
// ready at ip since at, as the node's kubelet would.
func readyPod(t testing.TB, c kubernetes.Interface, ns, app, name, node, ip string, at time.Time) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Image: "example.invalid/echo:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A kubelet stamps each condition's transition; the endpointslice
	// controller takes its trigger time from the Ready one.
	now := at.UTC().Format(time.RFC3339)
	status := fmt.Sprintf(`{"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}],"conditions":[`+
		`{"type":"Ready","status":"True","lastTransitionTime":%q},{"type":"ContainersReady","status":"True","lastTransitionTime":%q}]}}`,
		ip, ip, now, now)
	if _, err := c.CoreV1().Pods(ns).Patch(t.Context(), name, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// sliceAddresses counts the addresses in service's EndpointSlices upstream
// (every Service's in ns when service is "").
func sliceAddresses(ctx context.Context, c kubernetes.Interface, ns, service string) int {
	var opts metav1.ListOptions
	if service != "" {
		opts.LabelSelector = discoveryv1.LabelServiceName + "=" + service
	}
	l, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, opts)
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
