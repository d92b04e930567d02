package gridhosts

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
)

// Typed objects shaped like what the StatefulSetGrid controller and the
// kubelet produce, for the pure-logic tests and the integration tests.

func newGrid(ns, name, key string, uid types.UID) *superedgev1.StatefulSetGrid {
	return &superedgev1.StatefulSetGrid{
		TypeMeta:   metav1.TypeMeta{APIVersion: superedgev1.SchemeGroupVersion.String(), Kind: gridname.KindStatefulSetGrid},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid},
		Spec: superedgev1.StatefulSetGridSpec{
			GridUniqKey: key,
			Template: appsv1.StatefulSetSpec{
				Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				ServiceName: "svc",
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/echo"}}},
				},
			},
		},
	}
}

func gridLabels(grid *superedgev1.StatefulSetGrid) map[string]string {
	return map[string]string{
		superedgev1.LabelGridSelector: grid.Name,
		superedgev1.LabelGridUniqKey:  grid.Spec.GridUniqKey,
		"app":                         grid.Name,
	}
}

// newSet is the StatefulSet {grid}-{value} as SuperEdge's controller builds
// it: the grid labels on the StatefulSet only, the user's template (here
// app={grid}) untouched but for the nodeSelector.
func newSet(grid *superedgev1.StatefulSetGrid, value, svc string, uid types.UID, replicas int32) *appsv1.StatefulSet {
	labels := gridLabels(grid)
	podLabels := map[string]string{"app": grid.Name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: grid.Namespace, Name: grid.Name + "-" + value, UID: uid, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: superedgev1.SchemeGroupVersion.String(), Kind: gridname.KindStatefulSetGrid,
				Name: grid.Name, UID: grid.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: svc,
			Selector:    &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{grid.Spec.GridUniqKey: value},
					Containers:   []corev1.Container{{Name: "c", Image: "registry.invalid/echo"}},
				},
			},
		},
	}
}

// newPod is pod {set}-{ordinal} on node with ips (status already filled),
// labelled as the StatefulSet controller labels its pods.
func newPod(set *appsv1.StatefulSet, ordinal int, node string, ips ...string) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", set.Name, ordinal)
	labels := map[string]string{appsv1.StatefulSetPodNameLabel: name}
	for k, v := range set.Spec.Template.Labels {
		labels[k] = v
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: set.Namespace, Name: name,
			UID:    types.UID("pod-" + name),
			Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: gridname.KindStatefulSet, Name: set.Name, UID: set.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Hostname:   fmt.Sprintf("%s-%d", set.Name, ordinal),
			Subdomain:  set.Spec.ServiceName,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/echo"}},
		},
	}
	setPodIPs(p, ips...)
	return p
}

func setPodIPs(p *corev1.Pod, ips ...string) {
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIPs = nil
	p.Status.PodIP = ""
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
	}
}

func newService(ns, name, gridKey string, headless bool) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "x"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	if gridKey != "" {
		s.Labels = map[string]string{superedgev1.LabelGridUniqKey: gridKey}
	}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

func newNode(name string, labels map[string]string, internalIP string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if internalIP != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}}
	}
	return n
}

type testEndpoint struct {
	ip, node, hostname string
	ready              bool
}

func newSlice(ns, name, svc string, port int32, eps ...testEndpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, "service.kubernetes.io/headless": "",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready)}}
		if e.node != "" {
			ep.NodeName = ptr.To(e.node)
		}
		if e.hostname != "" {
			ep.Hostname = ptr.To(e.hostname)
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}
