package watchcache

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource describes one served resource to its store and the handler: its
// name, group and version, scope, the fields a field selector may name, and
// how to make its objects and lists. The table below is every resource the
// wrapper serves.
type Resource struct {
	// Name names the resource's store (metrics, snapshot sections).
	Name string
	// path is the resource as request paths name it, when Name is not.
	path         string
	GroupVersion schema.GroupVersion
	Namespaced   bool
	// OwnNodeOnly: a view serves only its own node's object (Nodes): a
	// request for any other is not the view's (route).
	OwnNodeOnly bool
	objectTypes
	// fields are the field selector labels the apiserver supports for it.
	fields func(Object) fields.Set
}

// Names of the served resources, as request paths name them.
const (
	ResourceServices       = "services"
	ResourceEndpoints      = "endpoints"
	ResourceEndpointSlices = "endpointslices"
	ResourceNodes          = "nodes"
	ResourceNamespaces     = "namespaces"
	ResourceServiceCIDRs   = "servicecidrs"
)

// The served resources.
var (
	Services = &Resource{
		Name: ResourceServices, GroupVersion: corev1.SchemeGroupVersion, Namespaced: true, fields: serviceFields,
		objectTypes: typed(func(m metav1.ListMeta, items []corev1.Service) runtime.Object {
			return &corev1.ServiceList{ListMeta: m, Items: items}
		}),
	}
	Endpoints = &Resource{
		Name: ResourceEndpoints, GroupVersion: corev1.SchemeGroupVersion, Namespaced: true,
		fields: func(o Object) fields.Set { return objectMetaFields(o, true) },
		objectTypes: typed(func(m metav1.ListMeta, items []corev1.Endpoints) runtime.Object {
			return &corev1.EndpointsList{ListMeta: m, Items: items}
		}),
	}
	EndpointSlices = &Resource{
		Name: ResourceEndpointSlices, GroupVersion: discoveryv1.SchemeGroupVersion, Namespaced: true, fields: endpointSliceFields,
		objectTypes: typed(func(m metav1.ListMeta, items []discoveryv1.EndpointSlice) runtime.Object {
			return &discoveryv1.EndpointSliceList{ListMeta: m, Items: items}
		}),
	}
	Nodes = &Resource{
		Name: ResourceNodes, GroupVersion: corev1.SchemeGroupVersion, OwnNodeOnly: true, fields: nodeFields,
		objectTypes: typed(func(m metav1.ListMeta, items []corev1.Node) runtime.Object {
			return &corev1.NodeList{ListMeta: m, Items: items}
		}),
	}
	Namespaces = &Resource{
		Name: ResourceNamespaces, GroupVersion: corev1.SchemeGroupVersion, fields: namespaceFields,
		objectTypes: typed(func(m metav1.ListMeta, items []corev1.Namespace) runtime.Object {
			return &corev1.NamespaceList{ListMeta: m, Items: items}
		}),
	}
	// ServiceCIDRs: cluster-scoped, and like every resource whose strategy
	// adds none of its own, selectable by metadata.name alone.
	ServiceCIDRs = &Resource{
		Name: ResourceServiceCIDRs, GroupVersion: networkingv1.SchemeGroupVersion,
		fields: func(o Object) fields.Set { return objectMetaFields(o, false) },
		objectTypes: typed(func(m metav1.ListMeta, items []networkingv1.ServiceCIDR) runtime.Object {
			return &networkingv1.ServiceCIDRList{ListMeta: m, Items: items}
		}),
	}
)

// As is r served from a store of another name (a second store of the same
// resource, in another view).
func (r *Resource) As(name string) *Resource {
	c := *r
	c.Name, c.path = name, r.PathName()
	return &c
}

// PathName is the resource as request paths name it.
func (r *Resource) PathName() string {
	if r.path != "" {
		return r.path
	}
	return r.Name
}

// GroupVersionResource is what a request names r by.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.GroupVersion.WithResource(r.PathName())
}

// GroupResource names r in errors.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.PathName()}
}

// CollectionPath is the path of a list or watch of r across namespaces
// (/api/v1/services, /apis/discovery.k8s.io/v1/endpointslices).
func (r *Resource) CollectionPath() string {
	if r.GroupVersion.Group == "" {
		return "/api/" + r.GroupVersion.Version + "/" + r.PathName()
	}
	return "/apis/" + r.GroupVersion.Group + "/" + r.GroupVersion.Version + "/" + r.PathName()
}

// Key is the store key of the object namespace/name of r.
func (r *Resource) Key(namespace, name string) string {
	if r.Namespaced {
		return namespace + "/" + name
	}
	return name
}

// Fields are the field selector labels of o the apiserver supports.
func (r *Resource) Fields(o Object) fields.Set { return r.fields(o) }

// SupportsField reports whether a field selector may name label.
func (r *Resource) SupportsField(label string) bool {
	_, ok := r.fields(r.NewEmpty())[label]
	return ok
}

// NewStore makes an empty store of r on clock.
func (r *Resource) NewStore(clock *Clock, limits LogLimits) *Store {
	return NewStore(r.Name, clock, r.NewEmpty, r.fields, limits)
}

// NewMirrorStore makes an empty mirror store of r (mirror.go).
func (r *Resource) NewMirrorStore(limits LogLimits) *Store {
	return NewMirrorStore(r.Name, r.NewEmpty, r.fields, limits)
}

// objectTypes makes a resource's objects and lists.
type objectTypes struct {
	newEmpty func() Object
	newList  func(items []Object, rv string) runtime.Object
}

// NewEmpty makes an empty object of the resource.
func (t objectTypes) NewEmpty() Object { return t.newEmpty() }

// NewList wraps items in the resource's list type at version rv.
func (t objectTypes) NewList(items []Object, rv string) runtime.Object { return t.newList(items, rv) }

// typed is the objectTypes of objects of type T; list wraps a slice of them
// in their list type.
func typed[T any, P interface {
	*T
	Object
}](list func(metav1.ListMeta, []T) runtime.Object) objectTypes {
	return objectTypes{
		newEmpty: func() Object { return P(new(T)) },
		newList: func(items []Object, rv string) runtime.Object {
			out := make([]T, len(items))
			for i, o := range items {
				out[i] = *any(o).(P)
			}
			return list(metav1.ListMeta{ResourceVersion: rv}, out)
		},
	}
}

func objectMetaFields(o Object, namespaced bool) fields.Set {
	s := fields.Set{"metadata.name": o.GetName()}
	if namespaced {
		s["metadata.namespace"] = o.GetNamespace()
	}
	return s
}

// serviceFields, endpointSliceFields, nodeFields and namespaceFields are the
// field labels the apiserver supports for each kind.
func serviceFields(o Object) fields.Set {
	s := objectMetaFields(o, true)
	svc := o.(*corev1.Service)
	s["spec.clusterIP"] = svc.Spec.ClusterIP
	s["spec.type"] = string(svc.Spec.Type)
	return s
}

func endpointSliceFields(o Object) fields.Set {
	s := objectMetaFields(o, true)
	s["addressType"] = string(o.(*discoveryv1.EndpointSlice).AddressType)
	return s
}

func nodeFields(o Object) fields.Set {
	s := objectMetaFields(o, false)
	s["spec.unschedulable"] = "false"
	if o.(*corev1.Node).Spec.Unschedulable {
		s["spec.unschedulable"] = "true"
	}
	return s
}

func namespaceFields(o Object) fields.Set {
	s := objectMetaFields(o, false)
	s["status.phase"] = string(o.(*corev1.Namespace).Status.Phase)
	return s
}
