package explain

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// DNSName is a unified StatefulSetGrid name {ssg}-{i}.{svc}.{ns}.svc.{zone}.
type DNSName struct {
	Grid, Service, Namespace string
	Ordinal                  int
}

// ParseDNSName splits a unified name in zone (e.g. cluster.local).
func ParseDNSName(qname, zone string) (DNSName, error) {
	q := strings.TrimSuffix(strings.ToLower(qname), ".")
	suffix := ".svc." + strings.Trim(strings.ToLower(zone), ".")
	if !strings.HasSuffix(q, suffix) {
		return DNSName{}, fmt.Errorf("%q is not under svc.%s", qname, zone)
	}
	parts := strings.Split(strings.TrimSuffix(q, suffix), ".")
	if len(parts) != 3 {
		return DNSName{}, fmt.Errorf("%q is not {statefulsetgrid}-{ordinal}.{service}.{namespace}.svc.%s", qname, zone)
	}
	i := strings.LastIndexByte(parts[0], '-')
	if i <= 0 {
		return DNSName{}, fmt.Errorf("%q: first label %q has no -{ordinal}", qname, parts[0])
	}
	ord, err := strconv.Atoi(parts[0][i+1:])
	if err != nil || ord < 0 || strconv.Itoa(ord) != parts[0][i+1:] {
		return DNSName{}, fmt.Errorf("%q: %q is not an ordinal", qname, parts[0][i+1:])
	}
	return DNSName{Grid: parts[0][:i], Ordinal: ord, Service: parts[1], Namespace: parts[2]}, nil
}

// DNSObjects are what the resolution reads; nil means not found.
type DNSObjects struct {
	Grid        *superedgev1.StatefulSetGrid
	Node        *corev1.Node
	StatefulSet *appsv1.StatefulSet // {grid}-{value}
	Service     *corev1.Service
	Pod         *corev1.Pod // {grid}-{value}-{ordinal}
}

// DNSReport is the resolution of one unified name for one node, step by step.
type DNSReport struct {
	Name    string    `json:"name"`
	Node    string    `json:"node"`
	Steps   []DNSStep `json:"steps"`
	Answers []string  `json:"answers"`
	// Resolved is true when every step passed and there is an answer.
	Resolved bool `json:"resolved"`
}

// DNSStep is one link of the chain grid -> key -> value -> StatefulSet -> pod -> IPs.
type DNSStep struct {
	Step   string `json:"step"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Steps of the chain, in order; the names are what kubectl grid prints.
const (
	StepGrid        = "statefulsetgrid"
	StepNodeValue   = "nodeunit"
	StepStatefulSet = "statefulset"
	StepService     = "service"
	StepPod         = "pod"
	StepAddresses   = "addresses"
)

// DNS walks the chain gridhosts answers a unified name with, for
// node self: StatefulSetGrid -> its gridUniqKey -> the node's value ->
// StatefulSet {ssg}-{value} consistently controlled by the grid -> the grid
// Service -> pod {ssg}-{value}-{i} controlled by that StatefulSet -> its
// podIPs. It stops at the first step that fails and says why.
func DNS(qname string, n DNSName, self string, o DNSObjects) DNSReport {
	r := DNSReport{Name: qname, Node: self, Answers: []string{}}
	step := func(name string, ok bool, format string, args ...any) bool {
		r.Steps = append(r.Steps, DNSStep{Step: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
		return ok
	}
	g := o.Grid
	if !step(StepGrid, g != nil && g.Spec.GridUniqKey != "", "%s", gridDetail(n, g)) {
		return r
	}
	key := g.Spec.GridUniqKey
	if o.Node == nil {
		step(StepNodeValue, false, "node %s not found", self)
		return r
	}
	value, ok := o.Node.Labels[key]
	if !step(StepNodeValue, ok && value != "", "node %s has %s=%q", self, key, value) {
		r.Steps[len(r.Steps)-1].Detail = fmt.Sprintf("node %s has no label %s: it is in no nodeunit of this grid", self, key)
		return r
	}
	setName := n.Grid + "-" + value
	if ok, why := setConsistent(o.StatefulSet, g, n, key, value); !step(StepStatefulSet, ok, "%s: %s", setName, why) {
		return r
	}
	if ok, why := serviceConsistent(o.Service, key); !step(StepService, ok, "%s: %s", n.Service, why) {
		return r
	}
	podName := fmt.Sprintf("%s-%d", setName, n.Ordinal)
	if ok, why := podConsistent(o.Pod, o.StatefulSet); !step(StepPod, ok, "%s: %s", podName, why) {
		return r
	}
	for _, ip := range o.Pod.Status.PodIPs {
		r.Answers = append(r.Answers, ip.IP)
	}
	if len(r.Answers) == 0 && o.Pod.Status.PodIP != "" {
		r.Answers = append(r.Answers, o.Pod.Status.PodIP)
	}
	if !step(StepAddresses, len(r.Answers) > 0, "%s", addrDetail(r.Answers)) {
		return r
	}
	r.Resolved = true
	return r
}

func gridDetail(n DNSName, g *superedgev1.StatefulSetGrid) string {
	switch {
	case g == nil:
		return fmt.Sprintf("StatefulSetGrid %s/%s not found: the name is not a grid name (next plugin answers)", n.Namespace, n.Grid)
	case g.Spec.GridUniqKey == "":
		return fmt.Sprintf("StatefulSetGrid %s/%s has an empty gridUniqKey", n.Namespace, n.Grid)
	}
	return fmt.Sprintf("StatefulSetGrid %s/%s, gridUniqKey %s", n.Namespace, n.Grid, g.Spec.GridUniqKey)
}

// setConsistent is the rule for a StatefulSet to count as the grid's child
// for nodeunit value.
func setConsistent(s *appsv1.StatefulSet, g *superedgev1.StatefulSetGrid, n DNSName, key, value string) (bool, string) {
	switch {
	case s == nil:
		return false, "not found (the controller has not created it, or the nodeunit name cannot form a child name)"
	case !metav1.IsControlledBy(s, g):
		return false, "not controlled by the StatefulSetGrid (owner kind/UID differ)"
	case s.Labels[superedgev1.LabelGridSelector] != g.Name:
		return false, fmt.Sprintf("label %s=%q, want %q", superedgev1.LabelGridSelector, s.Labels[superedgev1.LabelGridSelector], g.Name)
	}
	if k, _ := superedgev1.GridUniqKeyOf(s.Labels, s.Annotations); k != key {
		return false, fmt.Sprintf("grid key %q, want %q", k, key)
	}
	if s.Spec.ServiceName != n.Service {
		return false, fmt.Sprintf("serviceName %q, the name asks for %q", s.Spec.ServiceName, n.Service)
	}
	if v := s.Spec.Template.Spec.NodeSelector[key]; v != value {
		return false, fmt.Sprintf("nodeSelector %s=%q, want %q", key, v, value)
	}
	return true, "controlled by the grid, serviceName and nodeSelector match"
}

func serviceConsistent(s *corev1.Service, key string) (bool, string) {
	if s == nil {
		return false, "Service not found"
	}
	if k, ok := superedgev1.GridUniqKeyOf(s.Labels, s.Annotations); !ok || k != key {
		return false, fmt.Sprintf("Service grid key %q, want %q (is it the ServiceGrid's Service?)", k, key)
	}
	return true, "grid Service with the same grid key"
}

func podConsistent(p *corev1.Pod, s *appsv1.StatefulSet) (bool, string) {
	switch {
	case p == nil:
		return false, "not found (ordinal beyond replicas, or not created yet)"
	case !metav1.IsControlledBy(p, s):
		return false, "not controlled by the StatefulSet"
	}
	return true, fmt.Sprintf("on node %s, phase %s", p.Spec.NodeName, p.Status.Phase)
}

func addrDetail(ips []string) string {
	if len(ips) == 0 {
		return "the pod has no IP yet: not served"
	}
	return strings.Join(ips, ", ")
}
