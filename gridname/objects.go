package gridname

import (
	"net/netip"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// Kinds of the controllers the rule expects.
const (
	KindStatefulSetGrid = "StatefulSetGrid"
	KindStatefulSet     = "StatefulSet"
)

// ControllerRef is the part of a controller ownerReference the rule reads.
type ControllerRef struct {
	Kind string
	Name string
	UID  types.UID
}

// ControllerOf returns m's controller, false when it has none.
func ControllerOf(m *metav1.ObjectMeta) (ControllerRef, bool) {
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		return ControllerRef{Kind: ref.Kind, Name: ref.Name, UID: ref.UID}, true
	}
	return ControllerRef{}, false
}

// GridKeyRef is how an object names its grid key: the label
// superedge.io/grid-uniq-key (SuperEdge's objects: the key itself) and, on
// objects servicegroup made, the annotation of the same name (the key
// verbatim, for prefixed keys the label cannot hold).
type GridKeyRef struct {
	Label         string
	HasLabel      bool
	Annotation    string
	HasAnnotation bool
}

// GridKeyRefOf reads the grid key reference of an object's metadata.
func GridKeyRefOf(labels, annotations map[string]string) GridKeyRef {
	r := GridKeyRef{}
	r.Label, r.HasLabel = labels[superedgev1.LabelGridUniqKey]
	r.Annotation, r.HasAnnotation = annotations[superedgev1.AnnotationGridUniqKey]
	r.HasAnnotation = r.HasAnnotation && r.Annotation != ""
	return r
}

// Is reports whether the object belongs to grid key key. The annotation,
// when present, decides (it is the key verbatim; the label of a prefixed key
// is a lossy encoding); without it the label must be exactly the label value
// servicegroup and SuperEdge write for key.
func (r GridKeyRef) Is(key string) bool {
	return r.matches(key, superedgev1.GridUniqKeyLabelValue(key))
}

// IsOf is Is for grid g, with its label value encoded in advance: the
// query path does no encoding.
func (r GridKeyRef) IsOf(g *Grid) bool { return r.matches(g.Key, g.KeyLabel) }

func (r GridKeyRef) matches(key, label string) bool {
	if key == "" {
		return false
	}
	if r.HasAnnotation {
		return r.Annotation == key
	}
	return r.HasLabel && r.Label == label
}

// Key is the grid key the object names (annotation first, else label).
func (r GridKeyRef) Key() (string, bool) {
	if r.HasAnnotation {
		return r.Annotation, true
	}
	return r.Label, r.HasLabel && r.Label != ""
}

// Grid is a StatefulSetGrid: its identity and grid key.
type Grid struct {
	Name string
	UID  types.UID
	Key  string
	// KeyLabel is the grid-uniq-key label value its children carry for
	// Key, encoded once here rather than on every query.
	KeyLabel string
}

// GridOf is the small form of g.
func GridOf(g *superedgev1.StatefulSetGrid) Grid {
	return Grid{Name: g.Name, UID: g.UID, Key: g.Spec.GridUniqKey, KeyLabel: superedgev1.GridUniqKeyLabelValue(g.Spec.GridUniqKey)}
}

// StatefulSet is what the rule checks of a grid's child StatefulSet.
type StatefulSet struct {
	Name            string
	UID             types.UID
	Owner           ControllerRef
	HasOwner        bool
	GridSelector    string // label superedge.io/grid-selector
	HasGridSelector bool
	GridKey         GridKeyRef
	ServiceName     string
	NodeSelector    map[string]string
	Terminating     bool // being deleted: half-deleted sets are not served
}

// StatefulSetOf is the small form of s.
func StatefulSetOf(s *appsv1.StatefulSet) StatefulSet {
	o := StatefulSet{Name: s.Name, UID: s.UID, ServiceName: s.Spec.ServiceName, Terminating: s.DeletionTimestamp != nil}
	o.Owner, o.HasOwner = ControllerOf(&s.ObjectMeta)
	o.GridSelector, o.HasGridSelector = s.Labels[superedgev1.LabelGridSelector]
	o.GridKey = GridKeyRefOf(s.Labels, s.Annotations)
	if ns := s.Spec.Template.Spec.NodeSelector; len(ns) > 0 {
		o.NodeSelector = make(map[string]string, len(ns))
		for k, v := range ns {
			o.NodeSelector[k] = v
		}
	}
	return o
}

// Service is what the rule checks of the Service a unified name names.
type Service struct {
	GridKey GridKeyRef
}

// ServiceOf is the small form of s.
func ServiceOf(s *corev1.Service) Service {
	return Service{GridKey: GridKeyRefOf(s.Labels, s.Annotations)}
}

// Pod is what the rule checks of a pod and what it answers with. Grid pods
// are found through their controller (the StatefulSet), never through
// labels on the pod: SuperEdge leaves the user's pod template untouched.
type Pod struct {
	Owner       ControllerRef
	HasOwner    bool
	Terminating bool
	Finished    bool // Succeeded or Failed: its IP may be reused
	IPs         []netip.Addr
}

// PodOf is the small form of p: its podIPs (else podIP), unmapped.
func PodOf(p *corev1.Pod) Pod {
	o := Pod{
		Terminating: p.DeletionTimestamp != nil,
		Finished:    p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed,
	}
	o.Owner, o.HasOwner = ControllerOf(&p.ObjectMeta)
	ips := make([]string, 0, len(p.Status.PodIPs)+1)
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = append(ips, p.Status.PodIP)
	}
	o.IPs = ParseIPs(ips)
	return o
}

// ParseIPs parses addresses, unmapped; unparsable ones are dropped.
func ParseIPs(in []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range in {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
