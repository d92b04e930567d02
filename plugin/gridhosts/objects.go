package gridhosts

import (
	"net/netip"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/topology"
)

// The informers store these small objects instead of the API types: an edge
// node keeps only what the index needs (as plugin/kubernetes/object does).
// Each embeds ObjectMeta with name, namespace, UID and resourceVersion only,
// so cache keys and DeletedFinalStateUnknown work unchanged, and carries the
// time the transform saw it, for the event-to-answerable metric.

// tiny is the part every small object shares.
type tiny struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	received time.Time
	written  time.Time // the apiserver's latest write (managedFields), one-second grain
}

func newTiny(m *metav1.ObjectMeta) tiny {
	t := tiny{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion},
		received:   time.Now(),
	}
	for _, f := range m.ManagedFields {
		if f.Time != nil && f.Time.After(t.written) {
			t.written = f.Time.Time
		}
	}
	return t
}

func (t *tiny) receivedAt() time.Time { return t.received }
func (t *tiny) writtenAt() time.Time  { return t.written }

// controllerRef is the part of a controller ownerReference the checks need.
type controllerRef struct {
	Kind string
	Name string
	UID  types.UID
}

func controllerOf(m *metav1.ObjectMeta) (controllerRef, bool) {
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		return controllerRef{Kind: ref.Kind, Name: ref.Name, UID: ref.UID}, true
	}
	return controllerRef{}, false
}

// gridObj is a StatefulSetGrid: its UID and grid key.
type gridObj struct {
	tiny
	Key string
	// KeyLabel is the grid-uniq-key label value its children carry for
	// Key, encoded once here rather than on every query.
	KeyLabel string
}

func (o *gridObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// gridKeyRef is how an object names its grid key: the label
// superedge.io/grid-uniq-key (SuperEdge's objects: the key itself) and, on
// objects servicegroup made, the annotation of the same name (the key
// verbatim, for prefixed keys the label cannot hold).
type gridKeyRef struct {
	Label         string
	HasLabel      bool
	Annotation    string
	HasAnnotation bool
}

func gridKeyRefOf(labels, annotations map[string]string) gridKeyRef {
	r := gridKeyRef{}
	r.Label, r.HasLabel = labels[superedgev1.LabelGridUniqKey]
	r.Annotation, r.HasAnnotation = annotations[superedgev1.AnnotationGridUniqKey]
	r.HasAnnotation = r.HasAnnotation && r.Annotation != ""
	return r
}

// is reports whether the object belongs to grid key key. The annotation,
// when present, decides (it is the key verbatim; the label of a prefixed key
// is a lossy encoding); without it the label must be exactly the label value
// servicegroup and SuperEdge write for key.
func (r gridKeyRef) is(key string) bool {
	return r.matches(key, superedgev1.GridUniqKeyLabelValue(key))
}

// isOf is is for grid g, with its label value encoded in advance: the
// query path does no encoding.
func (r gridKeyRef) isOf(g *gridObj) bool { return r.matches(g.Key, g.KeyLabel) }

// matches is is with label = superedgev1.GridUniqKeyLabelValue(key).
func (r gridKeyRef) matches(key, label string) bool {
	if key == "" {
		return false
	}
	if r.HasAnnotation {
		return r.Annotation == key
	}
	return r.HasLabel && r.Label == label
}

// key is the grid key the object names (annotation first, else label).
func (r gridKeyRef) key() (string, bool) {
	if r.HasAnnotation {
		return r.Annotation, true
	}
	return r.Label, r.HasLabel && r.Label != ""
}

// setObj is a StatefulSet: what the consistency checks look at.
type setObj struct {
	tiny
	Owner           controllerRef
	HasOwner        bool
	GridSelector    string // label superedge.io/grid-selector
	HasGridSelector bool
	GridKey         gridKeyRef
	ServiceName     string
	NodeSelector    map[string]string
	Terminating     bool // being deleted: half-deleted sets are not served
}

func (o *setObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// podObj is a Pod: where it runs, its addresses and its controller. Grid
// pods are found through their controller (the StatefulSet), never through
// labels on the pod: SuperEdge leaves the user's pod template untouched.
type podObj struct {
	tiny
	Owner       controllerRef
	HasOwner    bool
	Created     time.Time // newest holder of a reused address wins
	NodeName    string
	IPs         []netip.Addr
	Terminating bool
	Finished    bool // Succeeded or Failed: its IP may be reused
}

func (o *podObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// svcObj is a Service: headless or not, and whether it is a grid service.
// Its topology keys are parsed here, once per Service change.
type svcObj struct {
	tiny
	GridKey  gridKeyRef
	Headless bool
	// Keys are the topology keys of a grid Service: the topologyKeys
	// annotation when valid, else its grid key; nil for other Services.
	Keys []string
	// BadTopology is the parse error of an invalid topologyKeys annotation.
	BadTopology error
}

func (o *svcObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// nodeObj is a Node: labels and InternalIPs.
type nodeObj struct {
	tiny
	Labels      map[string]string
	InternalIPs []netip.Addr
}

func (o *nodeObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// sliceObj is an EndpointSlice of a (headless) Service.
type sliceObj struct {
	tiny
	Service   string
	Ports     []slicePort
	Endpoints []sliceEndpoint
}

type slicePort struct {
	Name     string
	Protocol string
	Port     uint16
}

type sliceEndpoint struct {
	IPs      []netip.Addr
	Ready    bool
	NodeName string
	Hostname string
}

func (o *sliceObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// serviceKeys decides which topology keys a grid Service's headless name
// follows: its topologyKeys annotation (the rule kube-proxy behind the
// wrapper follows too) when valid, else its grid key. An invalid annotation
// falls back to the grid key and is reported.
func serviceKeys(gk gridKeyRef, annotations map[string]string) ([]string, error) {
	var bad error
	if raw, ok := annotations[superedgev1.AnnotationTopologyKeys]; ok {
		keys, err := topology.ParseKeys(raw)
		if err == nil {
			return keys, nil
		}
		bad = err
	}
	if k, ok := gk.key(); ok {
		return []string{k}, bad
	}
	return nil, bad
}

func parseIPs(in []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range in {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// toTiny converts an API object from a watch into its small form. Objects
// already converted (a relist re-delivers them) pass through unchanged.
func toTiny(obj any) (any, error) {
	switch o := obj.(type) {
	case *superedgev1.StatefulSetGrid:
		return &gridObj{tiny: newTiny(&o.ObjectMeta), Key: o.Spec.GridUniqKey,
			KeyLabel: superedgev1.GridUniqKeyLabelValue(o.Spec.GridUniqKey)}, nil
	case *appsv1.StatefulSet:
		s := &setObj{tiny: newTiny(&o.ObjectMeta), ServiceName: o.Spec.ServiceName}
		s.Owner, s.HasOwner = controllerOf(&o.ObjectMeta)
		s.GridSelector, s.HasGridSelector = o.Labels[superedgev1.LabelGridSelector]
		s.GridKey = gridKeyRefOf(o.Labels, o.Annotations)
		s.Terminating = o.DeletionTimestamp != nil
		if ns := o.Spec.Template.Spec.NodeSelector; len(ns) > 0 {
			s.NodeSelector = make(map[string]string, len(ns))
			for k, v := range ns {
				s.NodeSelector[k] = v
			}
		}
		return s, nil
	case *corev1.Pod:
		p := &podObj{tiny: newTiny(&o.ObjectMeta), NodeName: o.Spec.NodeName, Created: o.CreationTimestamp.Time}
		p.Owner, p.HasOwner = controllerOf(&o.ObjectMeta)
		p.Terminating = o.DeletionTimestamp != nil
		p.Finished = o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed
		ips := make([]string, 0, len(o.Status.PodIPs)+1)
		for _, ip := range o.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		if len(ips) == 0 && o.Status.PodIP != "" {
			ips = append(ips, o.Status.PodIP)
		}
		p.IPs = parseIPs(ips)
		return p, nil
	case *corev1.Service:
		s := &svcObj{tiny: newTiny(&o.ObjectMeta), Headless: o.Spec.ClusterIP == corev1.ClusterIPNone}
		s.GridKey = gridKeyRefOf(o.Labels, o.Annotations)
		s.Keys, s.BadTopology = serviceKeys(s.GridKey, o.Annotations)
		return s, nil
	case *corev1.Node:
		n := &nodeObj{tiny: newTiny(&o.ObjectMeta)}
		if len(o.Labels) > 0 {
			n.Labels = make(map[string]string, len(o.Labels))
			for k, v := range o.Labels {
				n.Labels[k] = v
			}
		}
		var ips []string
		for _, a := range o.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		n.InternalIPs = parseIPs(ips)
		return n, nil
	case *discoveryv1.EndpointSlice:
		s := &sliceObj{tiny: newTiny(&o.ObjectMeta), Service: o.Labels[discoveryv1.LabelServiceName]}
		for _, p := range o.Ports {
			sp := slicePort{}
			if p.Name != nil {
				sp.Name = *p.Name
			}
			if p.Protocol != nil {
				sp.Protocol = string(*p.Protocol)
			} else {
				sp.Protocol = string(corev1.ProtocolTCP)
			}
			if p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
				sp.Port = uint16(*p.Port)
			} else {
				continue // a port SRV cannot express
			}
			s.Ports = append(s.Ports, sp)
		}
		for _, e := range o.Endpoints {
			ep := sliceEndpoint{IPs: parseIPs(e.Addresses), Ready: e.Conditions.Ready == nil || *e.Conditions.Ready}
			if e.NodeName != nil {
				ep.NodeName = *e.NodeName
			}
			if e.Hostname != nil {
				ep.Hostname = *e.Hostname
			}
			s.Endpoints = append(s.Endpoints, ep)
		}
		return s, nil
	}
	return obj, nil
}
