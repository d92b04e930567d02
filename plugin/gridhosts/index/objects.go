package index

import (
	"maps"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/topology"
)

// The informers store these small objects instead of the API types (Transform
// makes them): an edge node keeps only what the index needs (as CoreDNS's
// plugin/kubernetes/object does). Each carries its name, namespace and
// resourceVersion (slimMeta), so cache keys and DeletedFinalStateUnknown work
// unchanged, and the time the transform saw it, for the event-to-answerable
// metric. Once made, a small object is never changed: an update replaces it.

// Meta is the part every small object shares: the metadata the informer's
// keys and the index need, in a few words rather than a full ObjectMeta and
// TypeMeta (a pod's small form halves with it; the informers hold tens of
// thousands of them).
type Meta struct {
	slimMeta
	received int64 // UnixNano: a time.Time is three words, and every cached object has one
	written  int64 // the apiserver's latest write (managedFields), Unix seconds; 0: unknown
}

// slimMeta is an object's name, namespace and resourceVersion, and is a
// metav1.Object for client-go's keys and indexes (without an allocation per
// call, which the informers make several times per object); the fields it
// does not keep read as empty and their setters do nothing. The UID is not
// among them: tens of thousands of pods would carry an empty one; the
// kinds whose UID is read keep it in their own fields (uidMeta, or the
// gridname form's).
type slimMeta struct {
	noMeta
	Name, Namespace string
	ResourceVersion string
}

// uidMeta is the UID of an object whose small form has no other place for
// it (a Node's identifies its cluster to a snapshot).
type uidMeta struct{ UID types.UID }

func (m *uidMeta) GetUID() types.UID  { return m.UID }
func (m *uidMeta) SetUID(v types.UID) { m.UID = v }

func (m *slimMeta) GetNamespace() string        { return m.Namespace }
func (m *slimMeta) SetNamespace(v string)       { m.Namespace = v }
func (m *slimMeta) GetName() string             { return m.Name }
func (m *slimMeta) SetName(v string)            { m.Name = v }
func (m *slimMeta) GetResourceVersion() string  { return m.ResourceVersion }
func (m *slimMeta) SetResourceVersion(v string) { m.ResourceVersion = v }

// noMeta is the part of metav1.Object no small form keeps: its fields read
// as empty and its setters do nothing.
type noMeta struct{}

func (noMeta) GetUID() types.UID                             { return "" }
func (noMeta) SetUID(types.UID)                              {}
func (noMeta) GetGenerateName() string                       { return "" }
func (noMeta) SetGenerateName(string)                        {}
func (noMeta) GetGeneration() int64                          { return 0 }
func (noMeta) SetGeneration(int64)                           {}
func (noMeta) GetSelfLink() string                           { return "" }
func (noMeta) SetSelfLink(string)                            {}
func (noMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (noMeta) SetCreationTimestamp(metav1.Time)              {}
func (noMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (noMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (noMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (noMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (noMeta) GetLabels() map[string]string                  { return nil }
func (noMeta) SetLabels(map[string]string)                   {}
func (noMeta) GetAnnotations() map[string]string             { return nil }
func (noMeta) SetAnnotations(map[string]string)              {}
func (noMeta) GetFinalizers() []string                       { return nil }
func (noMeta) SetFinalizers([]string)                        {}
func (noMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (noMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (noMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (noMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// GetObjectKind: the small forms carry no kind (informers and the index
// tell them apart by Go type).
func (noMeta) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// intern returns a shared copy of s: the namespace, controller and node that
// thousands of pods repeat are held once (a new copy at most once per garbage
// collection, when the runtime forgets unused entries), not once per pod as
// each decoded object brings them.
func intern(s string) string { return unique.Make(s).Value() }

func newMeta(m *metav1.ObjectMeta) Meta {
	return Meta{
		slimMeta: slimMeta{Name: m.Name, Namespace: intern(m.Namespace), ResourceVersion: m.ResourceVersion},
		received: time.Now().UnixNano(),
		written:  lastWrite(m),
	}
}

// lastWrite is the time of the apiserver's latest write to m (managedFields),
// Unix seconds; 0 when unknown.
func lastWrite(m *metav1.ObjectMeta) int64 {
	var t int64
	for _, f := range m.ManagedFields {
		if f.Time != nil && f.Time.Unix() > t {
			t = f.Time.Unix()
		}
	}
	return t
}

// MetaOf is the metadata of an object read from elsewhere than a watch (a
// snapshot): its namespace and name alone.
func MetaOf(namespace, name string) Meta {
	return Meta{slimMeta: slimMeta{Name: name, Namespace: namespace}}
}

func (t *Meta) receivedAt() time.Time { return time.Unix(0, t.received) }

func (t *Meta) writtenAt() time.Time {
	if t.written == 0 {
		return time.Time{}
	}
	return time.Unix(t.written, 0)
}

// GridObj is a StatefulSetGrid: its UID and grid key.
type GridObj struct {
	Meta
	gridname.Grid
}

func (o *GridObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// SetObj is a StatefulSet: what the unified-name rule checks, and (node
// mode) which of its pods the pod selection names.
type SetObj struct {
	Meta
	gridname.StatefulSet
	// OrdinalStart is spec.ordinals.start; Replicas spec.replicas (1 when
	// unset); StatusReplicas status.replicas (pods it still has).
	OrdinalStart, Replicas, StatusReplicas int32
}

func (o *SetObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// PodObj is a Pod: where it runs, its addresses and its controller. It is
// the small form held by the ten thousand, so it keeps its own metadata in
// fewer words than Meta: the cache key alone (name and namespace are cut from
// it on use), times in 32 bits (both have a one-second grain). That keeps a
// pod in the allocator's 144-byte class, not 192.
type PodObj struct {
	noMeta
	// key is the informers' cache key "{namespace}/{name}" (the name alone
	// without a namespace).
	key      string
	rv       uint64 // resourceVersion; 0: unknown (not a decimal number), never the same as another
	received int64  // UnixNano, as Meta's
	written  uint32 // the apiserver's latest write, Unix seconds; 0: unknown
	created  uint32 // creationTimestamp, Unix seconds; 0: unset. The newest holder of a reused address wins
	gridname.Pod
	NodeName string
}

// NewPodObj is the small form of a pod named name in namespace ns, created
// at created (zero: unknown), for a pod read from elsewhere than a watch (a
// snapshot).
func NewPodObj(ns, name string, created time.Time) *PodObj {
	p := &PodObj{key: name}
	if ns != "" {
		p.key = ns + "/" + name
	}
	if !created.IsZero() {
		p.created = unixSeconds(created.Unix())
	}
	return p
}

// Key is the pod's cache key, "{namespace}/{name}".
func (o *PodObj) Key() string { return o.key }

// Namespace and Name are cut from the key (a namespace holds no "/").
func (o *PodObj) Namespace() string {
	if i := strings.IndexByte(o.key, '/'); i >= 0 {
		return o.key[:i]
	}
	return ""
}

func (o *PodObj) Name() string { return o.key[strings.IndexByte(o.key, '/')+1:] }

// GetNamespace and GetName hand client-go's key function (namespace "/"
// name, or the name alone) the pod's whole key as its name, so the key it
// returns is o.key itself, not a new string.
func (o *PodObj) GetNamespace() string           { return "" }
func (o *PodObj) SetNamespace(string)            {}
func (o *PodObj) GetName() string                { return o.key }
func (o *PodObj) SetName(string)                 {}
func (o *PodObj) GetResourceVersion() string     { return formatRV(o.rv) }
func (o *PodObj) SetResourceVersion(v string)    { o.rv = parseRV(v) }
func (o *PodObj) DeepCopyObject() runtime.Object { c := *o; return &c }
func (o *PodObj) receivedAt() time.Time          { return time.Unix(0, o.received) }
func (o *PodObj) writtenAt() time.Time           { return unixTime(o.written) }

// Created is the pod's creationTimestamp (one-second grain); zero when
// unknown.
func (o *PodObj) Created() time.Time { return unixTime(o.created) }

// sameRV: a and b are the same version of an object, both known.
func (o *PodObj) sameRV(other *PodObj) bool { return o.rv != 0 && o.rv == other.rv }

// parseRV keeps a pod's resourceVersion as a number: the apiserver's are
// decimal (etcd's revision), and ten thousand strings are 0.15 MB more.
// Any other form is 0, unknown, so that a version is never taken for
// another; as its string it is then "".
func parseRV(v string) uint64 {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != v {
		return 0
	}
	return n
}

func formatRV(n uint64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}

// unixSeconds is t in 32 bits for PodObj (0 for the zero time and for times
// it cannot hold, which read as unknown).
func unixSeconds(t int64) uint32 {
	if t <= 0 || t > math.MaxUint32 {
		return 0
	}
	return uint32(t)
}

func unixTime(s uint32) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(int64(s), 0)
}

// ServiceObj is a Service: headless or not, and whether it is a grid service.
// Its topology keys are parsed here, once per Service change.
type ServiceObj struct {
	Meta
	uidMeta
	gridname.Service
	Headless bool
	// Keys are the topology keys of a grid Service: the topologyKeys
	// annotation when valid, else its grid key; nil for other Services.
	Keys []string
	// BadTopology is the parse error of an invalid topologyKeys annotation.
	BadTopology error
}

func (o *ServiceObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// NodeObj is a Node: labels and InternalIPs.
type NodeObj struct {
	Meta
	uidMeta
	Labels      map[string]string
	InternalIPs []netip.Addr
}

func (o *NodeObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// NodeLabels is node name with labels alone, received now: how node mode
// learns a node from NodeLabelSummaries (and names a node that is gone).
func NodeLabels(name string, labels map[string]string) *NodeObj {
	return &NodeObj{Meta: Meta{slimMeta: slimMeta{Name: name}, received: time.Now().UnixNano()}, Labels: labels}
}

// SlimNode is node mode's transform of a Node: its name and labels (node
// mode places no client by its InternalIP).
func SlimNode(obj any) (any, error) {
	o, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n := &NodeObj{Meta: newMeta(&o.ObjectMeta), uidMeta: uidMeta{o.UID}}
	if len(o.Labels) > 0 {
		n.Labels = maps.Clone(o.Labels)
	}
	return n, nil
}

// SliceObj is an EndpointSlice of a (headless) Service.
type SliceObj struct {
	Meta
	uidMeta
	Service   string
	Ports     []SlicePort
	Endpoints []SliceEndpoint
}

type SlicePort struct {
	Name     string
	Protocol string
	Port     uint16
}

type SliceEndpoint struct {
	IPs      []netip.Addr
	Ready    bool
	NodeName string
	Hostname string
}

func (o *SliceObj) DeepCopyObject() runtime.Object { c := *o; return &c }

// serviceKeys decides which topology keys a grid Service's headless name
// follows: its topologyKeys annotation (the rule kube-proxy behind the
// wrapper follows too) when valid, else its grid key. An invalid annotation
// falls back to the grid key and is reported.
func serviceKeys(gk gridname.GridKeyRef, annotations map[string]string) ([]string, error) {
	var bad error
	if raw, ok := annotations[superedgev1.AnnotationTopologyKeys]; ok {
		keys, err := topology.ParseKeys(raw)
		if err == nil {
			return keys, nil
		}
		bad = err
	}
	if k, ok := gk.Key(); ok {
		return []string{k}, bad
	}
	return nil, bad
}

// Transform converts an API object from a watch into its small form. Objects
// already converted (a relist re-delivers them) pass through unchanged.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *superedgev1.StatefulSetGrid:
		return &GridObj{Meta: newMeta(&o.ObjectMeta), Grid: gridname.GridOf(o)}, nil
	case *appsv1.StatefulSet:
		so := &SetObj{Meta: newMeta(&o.ObjectMeta), StatefulSet: gridname.StatefulSetOf(o), Replicas: 1, StatusReplicas: o.Status.Replicas}
		if o.Spec.Replicas != nil {
			so.Replicas = *o.Spec.Replicas
		}
		if o.Spec.Ordinals != nil {
			so.OrdinalStart = o.Spec.Ordinals.Start
		}
		return so, nil
	case *corev1.Pod:
		p := NewPodObj(intern(o.Namespace), o.Name, o.CreationTimestamp.Time)
		p.rv, p.received, p.written = parseRV(o.ResourceVersion), time.Now().UnixNano(), unixSeconds(lastWrite(&o.ObjectMeta))
		p.Pod, p.NodeName = gridname.PodOf(o), intern(o.Spec.NodeName)
		p.Owner = gridname.ControllerRef{Kind: intern(p.Owner.Kind), Name: intern(p.Owner.Name), UID: types.UID(intern(string(p.Owner.UID)))}
		return p, nil
	case *corev1.Service:
		s := &ServiceObj{Meta: newMeta(&o.ObjectMeta), uidMeta: uidMeta{o.UID}, Service: gridname.ServiceOf(o), Headless: o.Spec.ClusterIP == corev1.ClusterIPNone}
		s.Keys, s.BadTopology = serviceKeys(s.GridKey, o.Annotations)
		return s, nil
	case *corev1.Node:
		n := &NodeObj{Meta: newMeta(&o.ObjectMeta), uidMeta: uidMeta{o.UID}}
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
		n.InternalIPs = gridname.ParseIPs(ips)
		return n, nil
	case *discoveryv1.EndpointSlice:
		s := &SliceObj{Meta: newMeta(&o.ObjectMeta), uidMeta: uidMeta{o.UID}, Service: o.Labels[discoveryv1.LabelServiceName]}
		for _, p := range o.Ports {
			sp := SlicePort{}
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
			ep := SliceEndpoint{IPs: gridname.ParseIPs(e.Addresses), Ready: topology.DNSUsable(e.Conditions)}
			if e.NodeName != nil {
				ep.NodeName = intern(*e.NodeName)
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
