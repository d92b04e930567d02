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
	newEmpty   func() Object
	newList    func(items []Object, rv string) runtime.Object
	// fields are the field selector labels the apiserver supports for it.
	fields func(Object) fields.Set
}

func objectMetaFields(o Object, namespaced bool) fields.Set {
	s := fields.Set{"metadata.name": o.GetName()}
	if namespaced {
		s["metadata.namespace"] = o.GetNamespace()
	}
	return s
}

func listOf[T any, P interface {
	*T
	Object
}](items []Object) []T {
	out := make([]T, len(items))
	for i, o := range items {
		out[i] = *any(o).(P)
	}
	return out
}

var servedResources = []*resource{
	{
		name: ResourceServices, gv: corev1.SchemeGroupVersion, namespaced: true,
		newEmpty: func() Object { return &corev1.Service{} },
		newList: func(items []Object, rv string) runtime.Object {
			return &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: listOf[corev1.Service](items)}
		},
		fields: func(o Object) fields.Set {
			s := objectMetaFields(o, true)
			svc := o.(*corev1.Service)
			s["spec.clusterIP"] = svc.Spec.ClusterIP
			s["spec.type"] = string(svc.Spec.Type)
			return s
		},
	},
	{
		name: ResourceEndpoints, gv: corev1.SchemeGroupVersion, namespaced: true,
		newEmpty: func() Object { return &corev1.Endpoints{} },
		newList: func(items []Object, rv string) runtime.Object {
			return &corev1.EndpointsList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: listOf[corev1.Endpoints](items)}
		},
		fields: func(o Object) fields.Set { return objectMetaFields(o, true) },
	},
	{
		name: ResourceEndpointSlices, gv: discoveryv1.SchemeGroupVersion, namespaced: true,
		newEmpty: func() Object { return &discoveryv1.EndpointSlice{} },
		newList: func(items []Object, rv string) runtime.Object {
			return &discoveryv1.EndpointSliceList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: listOf[discoveryv1.EndpointSlice](items)}
		},
		fields: func(o Object) fields.Set {
			s := objectMetaFields(o, true)
			s["addressType"] = string(o.(*discoveryv1.EndpointSlice).AddressType)
			return s
		},
	},
	{
		name: ResourceNodes, gv: corev1.SchemeGroupVersion, namespaced: false,
		newEmpty: func() Object { return &corev1.Node{} },
		newList: func(items []Object, rv string) runtime.Object {
			return &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: listOf[corev1.Node](items)}
		},
		fields: func(o Object) fields.Set {
			s := objectMetaFields(o, false)
			s["spec.unschedulable"] = "false"
			if o.(*corev1.Node).Spec.Unschedulable {
				s["spec.unschedulable"] = "true"
			}
			return s
		},
	},
}

func (r *resource) supportsField(label string) bool {
	_, ok := r.fields(r.newEmpty())[label]
	return ok
}
