package wrapper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
)

// What the node's DNS answers depend on, in the fleet: a StatefulSetGrid
// "db" (the controller makes one child per nodeunit, db-unit-N) with three
// pods per child, as the StatefulSet controller would make them (the
// pod-name label, the child as controller), behind the headless grid
// Service "db"; and a headless topology Service "hl" whose pods come and go.
const (
	fleetGridNS       = "fleetgrid"
	fleetGrid         = "db"
	fleetGridReplicas = 3
	fleetHeadless     = "hl"
)

type fleetGrids struct {
	f      *fleet
	grids  versioned.Interface
	hlPods int
}

func fleetChild(unit int) string { return fmt.Sprintf("%s-unit-%d", fleetGrid, unit) }

// startFleetGrids creates the grid, waits for the controller's children,
// and creates their pods, ready, on nodes of their nodeunits.
func startFleetGrids(b *testing.B, f *fleet) *fleetGrids {
	ctx := b.Context()
	g := &fleetGrids{f: f, grids: versioned.NewForConfigOrDie(f.cp.Config)}
	createNamespace(b, f.admin, fleetGridNS)
	if _, err := f.admin.CoreV1().ServiceAccounts(fleetGridNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	replicas := int32(fleetGridReplicas)
	grid := &superedgev1.StatefulSetGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetGridNS, Name: fleetGrid},
		Spec: superedgev1.StatefulSetGridSpec{GridUniqKey: gridKey, Template: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": fleetGrid}},
			ServiceName: fleetGrid,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": fleetGrid}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/db:1"}}},
			},
		}},
	}
	if _, err := g.grids.SuperedgeV1().StatefulSetGrids(fleetGridNS).Create(ctx, grid, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: fleetGridNS, Name: fleetGrid, Labels: map[string]string{superedgev1.LabelGridUniqKey: gridKey}},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": fleetGrid},
				Ports: []corev1.ServicePort{{Name: "db", Port: 5432, Protocol: corev1.ProtocolTCP}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: fleetGridNS, Name: fleetHeadless, Annotations: map[string]string{"topologyKeys": `["zone1"]`}},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": fleetHeadless},
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}},
	} {
		if _, err := f.admin.CoreV1().Services(fleetGridNS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	children := map[int]*appsv1.StatefulSet{}
	eventually(b, "the controller's child StatefulSets", 5*time.Minute, func(ctx context.Context) (bool, error) {
		for u := range fleetUnits {
			s, err := f.admin.AppsV1().StatefulSets(fleetGridNS).Get(ctx, fleetChild(u), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			children[u] = s
		}
		return true, nil
	})
	fleetParallel(fleetUnits*fleetGridReplicas, func(k int) {
		u, i := k/fleetGridReplicas, k%fleetGridReplicas
		child := children[u]
		name := fmt.Sprintf("%s-%d", child.Name, i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fleetGridNS, Name: name,
				Labels: map[string]string{"app": fleetGrid, appsv1.StatefulSetPodNameLabel: name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: child.Name, UID: child.UID,
					Controller: new(true), BlockOwnerDeletion: new(true)}}},
			Spec: corev1.PodSpec{NodeName: fleetNodeName(u + i*fleetUnits), Hostname: name, Subdomain: fleetGrid,
				Containers: []corev1.Container{{Name: "c", Image: "example.invalid/db:1"}}},
		}
		if _, err := f.admin.CoreV1().Pods(fleetGridNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Error(err)
			return
		}
		ip := fmt.Sprintf("10.40.%d.%d", u, i+1)
		now := f.next().UTC().Format(time.RFC3339)
		status := fmt.Sprintf(`{"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}],"conditions":[`+
			`{"type":"Ready","status":"True","lastTransitionTime":%q},{"type":"ContainersReady","status":"True","lastTransitionTime":%q}]}}`,
			ip, ip, now, now)
		if _, err := f.admin.CoreV1().Pods(fleetGridNS).Patch(ctx, name, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
			b.Error(err)
		}
	})
	eventually(b, "the grid Service's slices list every grid pod", 5*time.Minute, func(ctx context.Context) (bool, error) {
		return sliceAddresses(ctx, f.admin, fleetGridNS, fleetGrid) == fleetUnits*fleetGridReplicas, nil
	})
	return g
}

// podStatusChanges changes n times the status of grid pods of nodeunit
// unit (a condition no endpoint depends on, as a kubelet's probe report):
// the pod changes, no slice does.
func (g *fleetGrids) podStatusChanges(b *testing.B, unit, n int) {
	for k := range n {
		name := fmt.Sprintf("%s-%d", fleetChild(unit), k%fleetGridReplicas)
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"example.com/probe","status":"True","lastTransitionTime":%q,"message":"round %d"}]}}`,
			g.f.next().UTC().Format(time.RFC3339), k)
		if _, err := g.f.admin.CoreV1().Pods(fleetGridNS).Patch(b.Context(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			b.Fatal(err)
		}
	}
}

// headlessEndpointChanges adds n ready pods of the headless Service on
// nodes of nodeunit unit and waits until its slices list them.
func (g *fleetGrids) headlessEndpointChanges(b *testing.B, unit, n int) {
	for range n {
		g.hlPods++
		want := g.hlPods
		name := fmt.Sprintf("%s-%d", fleetHeadless, want)
		readyPod(b, g.f.admin, fleetGridNS, fleetHeadless, name, fleetNodeName(unit+(want%(g.f.nodesN/fleetUnits))*fleetUnits),
			fmt.Sprintf("10.41.%d.%d", want/250, want%250), g.f.next())
		eventually(b, "the headless Service's slice lists the pod", 2*time.Minute, func(ctx context.Context) (bool, error) {
			return sliceAddresses(ctx, g.f.admin, fleetGridNS, fleetHeadless) == want, nil
		})
	}
}

// childStatusChanges changes n times the status of nodeunit unit's child
// StatefulSet, as the StatefulSet controller does while its pods come and
// go.
func (g *fleetGrids) childStatusChanges(b *testing.B, unit, n int) {
	for k := range n {
		ready := k%fleetGridReplicas + 1
		patch := fmt.Sprintf(`{"status":{"replicas":%d,"readyReplicas":%d,"availableReplicas":%d,"currentReplicas":%d,"updatedReplicas":%d}}`,
			fleetGridReplicas, ready, ready, fleetGridReplicas, fleetGridReplicas)
		if _, err := g.f.admin.AppsV1().StatefulSets(fleetGridNS).Patch(b.Context(), fleetChild(unit), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			b.Fatal(err)
		}
	}
}
