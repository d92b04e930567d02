package wrapper

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Served resource names, as they appear in request paths.
const (
	ResourceServices       = "services"
	ResourceEndpoints      = "endpoints"
	ResourceEndpointSlices = "endpointslices"
	ResourceNodes          = "nodes"
)

// resource describes one served resource to the generic handler.
type resource struct {
	name       string
	gv         schema.GroupVersion
	namespaced bool
	objectTypes
	// fields are the field selector labels the apiserver supports for it.
	fields func(Object) fields.Set
}

// objectTypes makes a resource's objects and lists.
type objectTypes struct {
	newEmpty func() Object
	newList  func(items []Object, rv string) runtime.Object
}

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

var servedResources = []*resource{
	{
		name: ResourceServices, gv: corev1.SchemeGroupVersion, namespaced: true, fields: serviceFields,
		objectTypes: typed(func(m metav1.ListMeta, items []corev1.Service) runtime.Object {
			return &corev1.ServiceList{ListMeta: m, Items: items}
		}),
	},
	{
		name: ResourceEndpoints, gv: corev1.SchemeGroupVersion, namespaced: true,
		fields: func(o Object) fields.Set { return objectMetaFields(o, true) },
		objectTypes: typed(func(m metav1.ListMeta, items []corev1.Endpoints) runtime.Object {
			return &corev1.EndpointsList{ListMeta: m, Items: items}
		}),
	},
	{
		name: ResourceEndpointSlices, gv: discoveryv1.SchemeGroupVersion, namespaced: true, fields: endpointSliceFields,
		objectTypes: typed(func(m metav1.ListMeta, items []discoveryv1.EndpointSlice) runtime.Object {
			return &discoveryv1.EndpointSliceList{ListMeta: m, Items: items}
		}),
	},
	{
		name: ResourceNodes, gv: corev1.SchemeGroupVersion, namespaced: false, fields: nodeFields,
		objectTypes: typed(func(m metav1.ListMeta, items []corev1.Node) runtime.Object {
			return &corev1.NodeList{ListMeta: m, Items: items}
		}),
	},
}

// serviceFields, endpointSliceFields and nodeFields are the field labels the
// apiserver supports for each kind.
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

func (r *resource) supportsField(label string) bool {
	_, ok := r.fields(r.newEmpty())[label]
	return ok
}
