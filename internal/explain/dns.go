package explain

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/topology"
)

// DNSName is a unified StatefulSetGrid name {ssg}-{i}.{svc}.{ns}.svc.{zone}.
type DNSName struct {
	Grid, Service, Namespace string
	Ordinal                  int
}

// ParseDNSName splits a unified name in zone (e.g. cluster.local); the
// first label splits as gridhosts splits it (gridname.SplitHost).
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
	grid, ordinal, ok := gridname.SplitHost(parts[0])
	if !ok {
		return DNSName{}, fmt.Errorf("%q: first label %q does not end in -{ordinal}", qname, parts[0])
	}
	ord, err := strconv.Atoi(ordinal)
	if err != nil {
		return DNSName{}, fmt.Errorf("%q: %q is not an ordinal", qname, ordinal)
	}
	return DNSName{Grid: grid, Ordinal: ord, Service: parts[1], Namespace: parts[2]}, nil
}

// DNSObjects are what the resolution reads; nil means not found.
type DNSObjects struct {
	Grid        *superedgev1.StatefulSetGrid
	Node        *corev1.Node
	StatefulSet *appsv1.StatefulSet // {grid}-{value}
	Service     *corev1.Service
	Pod         *corev1.Pod // {grid}-{value}-{ordinal}

	// NodeMode explains the node's own DNS (gridhosts' `node` mode, the
	// shipped Corefile.node): the grid is read from its children, and only
	// the pods the node selects are answered. Children are the grid's child
	// StatefulSets (label superedge.io/grid-selector), as the apiserver has
	// them; the node holds those NodeHolds keeps.
	NodeMode bool
	Children []*appsv1.StatefulSet

	// RestrictKeys: the explained gridhosts sets require_node_restricted_keys,
	// under which a grid whose key a node can set on its own Node matches no
	// node. Corefile says where that was read, or why it could not be.
	RestrictKeys bool
	Corefile     string
}

// NodeHolds reports whether a node with labels holds child c in node mode:
// the controller labels every child it keeps with its nodeunit value and a
// node watches the children labelled with one of its label values, and
// every child without that label (SuperEdge's, before takeover).
func NodeHolds(c *appsv1.StatefulSet, labels map[string]string) bool {
	v, ok := c.Labels[superedgev1.LabelGridNodeUnit]
	if !ok {
		return true
	}
	for _, own := range labels {
		if own != "" && own == v {
			return true
		}
	}
	return false
}

// DNSReport is the resolution of one unified name for one node, step by step.
type DNSReport struct {
	Name    string    `json:"name"`
	Node    string    `json:"node"`
	Steps   []DNSStep `json:"steps"`
	Answers []string  `json:"answers"`
	// Resolved is true when every step passed and there is an answer.
	Resolved bool `json:"resolved"`
	// Reason is the rule's outcome ("resolved" or why not).
	Reason string `json:"reason"`
	// Corefile says whether the explained gridhosts sets
	// require_node_restricted_keys and where that was read, or why it
	// could not be told.
	Corefile string `json:"corefile,omitempty"`
}

// DNSStep is one link of the chain grid -> key -> value -> StatefulSet -> pod -> IPs.
type DNSStep struct {
	Step   string `json:"step"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Steps of the chain, in order; the names are what kubectl grid prints.
const (
	StepGrid        = gridname.StepGrid
	StepNodeValue   = gridname.StepNodeValue
	StepStatefulSet = gridname.StepStatefulSet
	StepService     = gridname.StepService
	StepPod         = gridname.StepPod
	StepAddresses   = gridname.StepAddresses
)

// DNS explains the answer gridhosts gives for a unified name on node self:
// the decision is gridname.Resolve, the rule gridhosts answers with, over
// the small forms of the API objects; this function only words it, one
// line per step up to the first that failed.
//
// In node mode (o.NodeMode) the grid is the one its children name
// (gridname.GridOfChildren, as the node's gridhosts reads it), and a pod the
// node does not select (gridname.NodeSelectsPod: an ordinal beyond the
// StatefulSet's replicas) is not found there.
func DNS(qname string, n DNSName, self string, o DNSObjects) DNSReport {
	f := objectFinder{grid: small(o.Grid, gridname.GridOf), set: small(o.StatefulSet, gridname.StatefulSetOf),
		svc: small(o.Service, gridname.ServiceOf), pod: small(o.Pod, gridname.PodOf)}
	var labels map[string]string
	if o.Node != nil {
		labels = o.Node.Labels
	}
	if o.NodeMode {
		f.grid = NodeModeGrid(n.Grid, o.Children, labels, o.Service)
		if o.Pod != nil && o.StatefulSet != nil && !nodeSelects(o.StatefulSet, o.Pod, n.Ordinal) {
			f.pod = nil
		}
	}
	res := gridname.Resolve(&gridname.Query{Grid: n.Grid, Ordinal: strconv.Itoa(n.Ordinal), Service: n.Service}, labels, o.Node != nil, f)
	if o.RestrictKeys && res.Grid != nil && res.Reason != gridname.GridNoKey && !topology.IsNodeRestrictedKey(res.Grid.Key) {
		// gridhosts checks the key of any grid the name names, whatever
		// the rule decided after it: the name is not answered.
		res.Reason, res.Pod = gridname.NodeKeyNotTrusted, nil
	}

	r := DNSReport{Name: qname, Node: self, Answers: []string{}, Resolved: res.Reason == gridname.Resolved, Reason: res.Reason.String(),
		Corefile: o.Corefile}
	if r.Resolved {
		for _, ip := range res.Pod.IPs {
			r.Answers = append(r.Answers, ip.String())
		}
	}
	failed := res.Reason.Step()
	for _, step := range gridname.Steps {
		ok := step != failed
		r.Steps = append(r.Steps, DNSStep{Step: step, OK: ok, Detail: dnsDetail(step, res, ok, n, self, o)})
		if !ok {
			break
		}
	}
	return r
}

// NodeModeGrid is grid as a node with labels reads it in node mode, from
// the children it holds among children (any StatefulSets: those whose
// controller is that grid count), asked through Service svc (nil: none).
// Nil when none names it.
func NodeModeGrid(grid string, children []*appsv1.StatefulSet, labels map[string]string, svc *corev1.Service) *gridname.Grid {
	var cs []gridname.Child
	for _, c := range children {
		if !NodeHolds(c, labels) {
			continue
		}
		set := gridname.StatefulSetOf(c)
		if child, ok := gridname.ChildOf(&set); ok && child.Grid.Name == grid {
			cs = append(cs, child)
		}
	}
	return gridname.GridOfChildren(cs, labels, small(svc, gridname.ServiceOf))
}

// nodeSelects reports whether the node selects pod, set's of ordinal: by
// the label the StatefulSet controller gives each pod it makes
// (statefulset.kubernetes.io/pod-name), for the ordinals
// gridname.NodeSelectsPod names.
func nodeSelects(set *appsv1.StatefulSet, pod *corev1.Pod, ordinal int) bool {
	if pod.Labels[appsv1.StatefulSetPodNameLabel] != pod.Name {
		return false
	}
	start, replicas := int32(0), int32(1)
	if set.Spec.Ordinals != nil {
		start = set.Spec.Ordinals.Start
	}
	if set.Spec.Replicas != nil {
		replicas = *set.Spec.Replicas
	}
	return ordinal >= 0 && gridname.NodeSelectsPod(uint64(ordinal), start, replicas, set.Status.Replicas)
}

// objectFinder is the rule's view of objects fetched from the apiserver by
// name: the StatefulSet {grid}-{value} and its pod {set}-{ordinal}.
type objectFinder struct {
	grid *gridname.Grid
	set  *gridname.StatefulSet
	svc  *gridname.Service
	pod  *gridname.Pod
}

func (f objectFinder) Grid() *gridname.Grid                     { return f.grid }
func (f objectFinder) StatefulSet(string) *gridname.StatefulSet { return f.set }
func (f objectFinder) Service() *gridname.Service               { return f.svc }
func (f objectFinder) Pod(*gridname.StatefulSet) *gridname.Pod  { return f.pod }

// small is the small form conv makes of o; nil for a nil o (not found).
func small[O, S any](o *O, conv func(*O) S) *S {
	if o == nil {
		return nil
	}
	s := conv(o)
	return &s
}

// dnsDetail words one step: what passed, or why it failed, with the values
// the rule compared.
func dnsDetail(step string, res gridname.Result, ok bool, n DNSName, self string, o DNSObjects) string {
	key := ""
	if res.Grid != nil {
		key = res.Grid.Key
	}
	setName := n.Grid + "-" + res.Value
	podName := fmt.Sprintf("%s-%d", setName, n.Ordinal)
	switch step {
	case StepGrid:
		switch res.Reason {
		case gridname.GridNotFound:
			if o.NodeMode {
				return fmt.Sprintf("no child StatefulSet this node holds names StatefulSetGrid %s/%s (node mode reads grids from their children): the name is not a grid name (next plugin answers)", n.Namespace, n.Grid)
			}
			return fmt.Sprintf("StatefulSetGrid %s/%s not found: the name is not a grid name (next plugin answers)", n.Namespace, n.Grid)
		case gridname.GridNoKey:
			return fmt.Sprintf("StatefulSetGrid %s/%s has an empty gridUniqKey", n.Namespace, n.Grid)
		}
		return fmt.Sprintf("StatefulSetGrid %s/%s, gridUniqKey %s", n.Namespace, n.Grid, key)
	case StepNodeValue:
		switch res.Reason {
		case gridname.NodeNotFound:
			return fmt.Sprintf("node %s not found", self)
		case gridname.NodeNoValue:
			return fmt.Sprintf("node %s has no label %s: it is in no nodeunit of this grid", self, key)
		case gridname.NodeKeyNotTrusted:
			return fmt.Sprintf("grid key %s is not under %s/: a node can set it on its own Node, so require_node_restricted_keys matches no node with it", key, topology.NodeRestrictionDomain)
		}
		return fmt.Sprintf("node %s has %s=%q", self, key, res.Value)
	case StepStatefulSet:
		if ok {
			return setName + ": controlled by the grid, serviceName and nodeSelector match"
		}
		s := o.StatefulSet
		switch res.Reason {
		case gridname.SetGridSelector:
			return fmt.Sprintf("%s: label %s=%q, want %q", setName, superedgev1.LabelGridSelector, s.Labels[superedgev1.LabelGridSelector], n.Grid)
		case gridname.SetGridKey:
			k, _ := res.Set.GridKey.Key()
			return fmt.Sprintf("%s: grid key %q, want %q", setName, k, key)
		case gridname.SetServiceName:
			return fmt.Sprintf("%s: serviceName %q, the name asks for %q", setName, s.Spec.ServiceName, n.Service)
		case gridname.SetNodeSelector:
			return fmt.Sprintf("%s: nodeSelector %s=%q, want %q", setName, key, s.Spec.Template.Spec.NodeSelector[key], res.Value)
		}
		return setName + ": " + res.Reason.String()
	case StepService:
		if ok {
			return n.Service + ": grid Service with the same grid key"
		}
		if res.Reason == gridname.ServiceGridKey {
			k, _ := gridname.ServiceOf(o.Service).GridKey.Key()
			return fmt.Sprintf("%s: Service grid key %q, want %q (is it the ServiceGrid's Service?)", n.Service, k, key)
		}
		return n.Service + ": " + res.Reason.String()
	case StepPod:
		if ok {
			return fmt.Sprintf("%s: on node %s, phase %s", podName, o.Pod.Spec.NodeName, o.Pod.Status.Phase)
		}
		if res.Reason == gridname.PodNotFound && o.NodeMode && o.Pod != nil {
			if o.Pod.Labels[appsv1.StatefulSetPodNameLabel] != o.Pod.Name {
				return fmt.Sprintf("%s: no label %s=%s (the StatefulSet controller's): the node's DNS, which selects pods by it, does not hold it", podName, appsv1.StatefulSetPodNameLabel, o.Pod.Name)
			}
			return fmt.Sprintf("%s: ordinal %d is beyond what the node selects (spec.ordinals.start + max(spec.replicas, status.replicas)): the node's DNS does not hold it", podName, n.Ordinal)
		}
		if res.Reason == gridname.PodFinished {
			return fmt.Sprintf("%s: phase %s: finished, its address may be reused: not served", podName, o.Pod.Status.Phase)
		}
		return podName + ": " + res.Reason.String()
	case StepAddresses:
		if ok {
			ips := make([]string, 0, len(res.Pod.IPs))
			for _, ip := range res.Pod.IPs {
				ips = append(ips, ip.String())
			}
			return strings.Join(ips, ", ")
		}
		return "the pod has no IP yet: not served"
	}
	return ""
}
