package wrapper

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper/internal/latencystages"
)

// protobufConfig asks upstream for protobuf, as kube-proxy does: about half
// the bytes of JSON on the link (unless the configuration names a content
// type already). Custom resources have no protobuf and use their own client.
func protobufConfig(c *rest.Config) *rest.Config {
	if c.ContentType != "" {
		return c
	}
	c = rest.CopyConfig(c)
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return c
}

// Indexers the syncer needs on the upstream caches.
var (
	sliceIndexers = cache.Indexers{
		indexByService: func(obj any) ([]string, error) {
			s := obj.(*discoveryv1.EndpointSlice)
			if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
				return []string{s.Namespace + "/" + name}, nil
			}
			return nil, nil
		},
	}
)

// dropManagedFields keeps cached objects small.
func dropManagedFields(obj any) (any, error) {
	latencystages.Stamp(obj, "reflector")
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// slimNodeMeta keeps only what topology needs from every node of the
// cluster: the metadata informer already fetched no spec or status; of the
// metadata, name, UID, resourceVersion and labels stay.
func slimNodeMeta(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels,
		},
	}, nil
}

// unwrap returns the object of a delete notification whose final state the
// informer missed.
func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
