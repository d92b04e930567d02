package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/trafficmode"
)

const zoneLabel = "topology.kubernetes.io/zone"

// zoneOf is a node's zone label and the writer's record ("-" when absent).
func (e *env) zoneOf(ctx context.Context, node string) (zone, written string, err error) {
	n, err := e.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	zone, written = "-", "-"
	if v, ok := n.Labels[zoneLabel]; ok {
		zone = v
	}
	if v, ok := n.Annotations[trafficmode.ZoneWrittenAnnotation]; ok {
		written = v
	}
	return zone, written, nil
}

func (e *env) waitZones(t *testing.T, what string, want map[string]string) {
	t.Helper()
	testwait.Eventually(t.Context(), t, 30*time.Second, what, func(ctx context.Context) error {
		for node, w := range want {
			zone, written, err := e.zoneOf(ctx, node)
			if err != nil {
				return err
			}
			if got := zone + " " + written; got != w {
				return fmt.Errorf("node %s: zone and record %q, want %q", node, got, w)
			}
		}
		return nil
	})
}

// readyPod is a pod on node with ip, Ready as a kubelet would report it.
func (e *env) readyPod(t *testing.T, name, node, ip string, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	p, err := e.kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := e.kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestNativeTrafficMode: the zone-label writer keeps topology.kubernetes.io/zone
// equal to the nodeunit of --zone-from-grid-key without ever touching a zone
// label someone else set; a ServiceGrid switches between the wrapper and the
// native mode in place (same Service, same ClusterIP); in the native mode
// kube-controller-manager's EndpointSlice controller gives every endpoint the
// hint forZones of its nodeunit, which is what kube-proxy routes by; a
// native-mode grid on another key is refused and its Service left as it is;
// with the flag off the writer removes exactly the zones it wrote.
func TestNativeTrafficMode(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{ControllerManager: true})
	ctx := t.Context()
	e.node(t, "n1", map[string]string{"zone1": "u1"})
	e.node(t, "n2", map[string]string{"zone1": "u2"})
	// A zone the cloud provider set: never ours to change.
	e.node(t, "n3", map[string]string{"zone1": "u2", zoneLabel: "cloud-a"})
	e.node(t, "n4", map[string]string{"other": "x"})
	_, _, stop := e.startController(t, func(o *Options) { o.ZoneFromGridKey = "zone1" })

	e.waitZones(t, "zones written from zone1", map[string]string{"n1": "u1 u1", "n2": "u2 u2", "n3": "cloud-a -", "n4": "- -"})
	testwait.Eventually(ctx, t, 20*time.Second, "Warning on n3", func(ctx context.Context) error {
		evs, err := e.warningEvents(ctx, "default", "n3", ReasonZoneLabelNotOurs)
		if err != nil {
			return err
		}
		if len(evs) == 0 || !strings.Contains(evs[0].Message, `not set to "u2"`) || !strings.Contains(evs[0].Message, `"cloud-a"`) {
			return fmt.Errorf("events %+v", evs)
		}
		return nil
	})
	// The label is owned by the writer's own field manager, by apply.
	n1, err := e.kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(n1.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == ZoneFieldManager && m.Operation == metav1.ManagedFieldsOperationApply &&
			m.FieldsV1 != nil && strings.Contains(string(m.FieldsV1.Raw), `"f:`+zoneLabel+`"`)
	}) {
		t.Errorf("n1's zone label is not applied by %s: %+v", ZoneFieldManager, n1.ManagedFields)
	}

	// A wrapper-mode grid (the default), then the same grid switched to native.
	sg := &superedgev1.ServiceGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api"},
		Spec: superedgev1.ServiceGridSpec{GridUniqKey: "zone1", Template: corev1.ServiceSpec{
			Selector: map[string]string{"app": "api"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}},
	}
	if _, err := e.grids.SuperedgeV1().ServiceGrids("default").Create(ctx, sg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	type view struct {
		uid, clusterIP, topologyKeys, distribution string
	}
	serviceView := func(ctx context.Context, name string) (view, error) {
		s, err := e.kube.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return view{}, err
		}
		v := view{uid: string(s.UID), clusterIP: s.Spec.ClusterIP, topologyKeys: "-", distribution: "-"}
		if k, ok := s.Annotations[superedgev1.AnnotationTopologyKeys]; ok {
			v.topologyKeys = k
		}
		if s.Spec.TrafficDistribution != nil {
			v.distribution = *s.Spec.TrafficDistribution
		}
		return v, nil
	}
	waitService := func(what, name, topologyKeys, distribution string) view {
		t.Helper()
		var v view
		testwait.Eventually(ctx, t, 20*time.Second, what, func(ctx context.Context) error {
			var err error
			if v, err = serviceView(ctx, name); err != nil {
				return err
			}
			if v.topologyKeys != topologyKeys || v.distribution != distribution {
				return fmt.Errorf("%s: topologyKeys %s, trafficDistribution %s; want %s, %s", name, v.topologyKeys, v.distribution, topologyKeys, distribution)
			}
			return nil
		})
		return v
	}
	wrapperView := waitService("wrapper mode", "api-svc", `["zone1"]`, "-")
	e.readyPod(t, "api-1", "n1", "10.88.0.1", map[string]string{"app": "api"})
	e.readyPod(t, "api-2", "n2", "10.88.0.2", map[string]string{"app": "api"})

	setMode := func(grid, mode string) {
		e.updateServiceGrid(t, "default", grid, func(g *superedgev1.ServiceGrid) {
			if g.Annotations == nil {
				g.Annotations = map[string]string{}
			}
			g.Annotations[trafficmode.Annotation] = mode
		})
	}
	setMode("api", "native")
	nativeView := waitService("native mode", "api-svc", "-", corev1.ServiceTrafficDistributionPreferSameZone)
	if nativeView.uid != wrapperView.uid || nativeView.clusterIP != wrapperView.clusterIP {
		t.Errorf("switching to native replaced the Service: %+v -> %+v", wrapperView, nativeView)
	}

	// What kube-proxy reads: each endpoint's zone and its hint, from kcm.
	testwait.Eventually(ctx, t, 30*time.Second, "EndpointSlice hints per nodeunit", func(ctx context.Context) error {
		l, err := e.kube.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=api-svc"})
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, s := range l.Items {
			for _, ep := range s.Endpoints {
				zone, hints := "-", "-"
				if ep.Zone != nil {
					zone = *ep.Zone
				}
				if ep.Hints != nil {
					var zs []string
					for _, z := range ep.Hints.ForZones {
						zs = append(zs, z.Name)
					}
					hints = strings.Join(zs, ",")
				}
				got[strings.Join(ep.Addresses, ",")] = zone + " forZones=" + hints
			}
		}
		want := map[string]string{"10.88.0.1": "u1 forZones=u1", "10.88.0.2": "u2 forZones=u2"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("endpoints %v, want %v", got, want)
		}
		return nil
	})

	// Back to the wrapper: the annotation returns, the distribution leaves.
	setMode("api", "wrapper")
	back := waitService("wrapper mode again", "api-svc", `["zone1"]`, "-")
	if back.uid != wrapperView.uid || back.clusterIP != wrapperView.clusterIP {
		t.Errorf("switching back replaced the Service: %+v -> %+v", wrapperView, back)
	}

	// A native-mode grid on another key is refused; its Service stays.
	other := sg.DeepCopy()
	other.Name, other.Spec.GridUniqKey = "other", "zone2"
	if _, err := e.grids.SuperedgeV1().ServiceGrids("default").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	otherView := waitService("other in wrapper mode", "other-svc", `["zone2"]`, "-")
	refused := func(grid, mode, reason, message string) {
		t.Helper()
		setMode(grid, mode)
		testwait.Eventually(ctx, t, 20*time.Second, grid+" refused", func(ctx context.Context) error {
			g, err := e.grids.SuperedgeV1().ServiceGrids("default").Get(ctx, grid, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionReconciled)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, message) || c.ObservedGeneration != g.Generation {
				return fmt.Errorf("Reconciled %+v", c)
			}
			evs, err := e.warningEvents(ctx, "default", grid, reason)
			if err != nil {
				return err
			}
			if len(evs) == 0 {
				return fmt.Errorf("no %s Event", reason)
			}
			return nil
		})
	}
	refused("other", "native", ReasonNativeModeKeyNotZoneSource, `sets from grid key "zone1", and this grid's key is "zone2"`)
	refused("api", "Native", ReasonInvalidTrafficMode, `"Native" is not a traffic mode`)
	for name, was := range map[string]view{"other-svc": otherView, "api-svc": back} {
		v, err := serviceView(ctx, name)
		if err != nil || v != was {
			t.Errorf("%s changed while its grid was refused: %+v -> %+v (%v)", name, was, v, err)
		}
	}

	// Nodeunits move: the zone follows; a node leaving every nodeunit loses it.
	e.relabel(t, "n1", map[string]any{"zone1": "u3"})
	e.relabel(t, "n2", map[string]any{"zone1": nil})
	e.waitZones(t, "zones follow the nodeunits", map[string]string{"n1": "u3 u3", "n2": "- -", "n3": "cloud-a -"})
	// Someone else overwrites a zone the writer set: it is theirs from then on.
	e.relabel(t, "n1", map[string]any{zoneLabel: "manual"})
	e.waitZones(t, "an overwritten zone is left to its writer", map[string]string{"n1": "manual -"})
	e.relabel(t, "n1", map[string]any{zoneLabel: nil})
	e.waitZones(t, "a removed zone is written again", map[string]string{"n1": "u3 u3"})

	// The flag turned off: the zones it wrote go, the cloud's stays.
	e.node(t, "n5", map[string]string{"zone1": "u5"})
	e.waitZones(t, "n5 written", map[string]string{"n5": "u5 u5"})
	stop()
	e.startController(t, nil)
	e.waitZones(t, "writer off: only its own zones removed", map[string]string{"n1": "- -", "n5": "- -", "n3": "cloud-a -", "n4": "- -"})
}
