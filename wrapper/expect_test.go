package wrapper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The expected served state is computed here from the apiserver's objects
// with the rule of the spec written out plainly, independently of the
// wrapper's filter and of package topology, and compared object by object.

// cluster is the apiserver's state of one namespace plus all Nodes.
type cluster struct {
	nodes     map[string]map[string]string
	services  map[string]*corev1.Service
	slices    []*discoveryv1.EndpointSlice
	endpoints []*corev1.Endpoints
}

func readCluster(ctx context.Context, c kubernetes.Interface, ns string) (*cluster, error) {
	cl := &cluster{nodes: map[string]map[string]string{}, services: map[string]*corev1.Service{}}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		cl.nodes[n.Name] = n.Labels
	}
	svcs, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range svcs.Items {
		cl.services[svcs.Items[i].Name] = &svcs.Items[i]
	}
	sls, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range sls.Items {
		cl.slices = append(cl.slices, &sls.Items[i])
	}
	eps, err := c.CoreV1().Endpoints(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range eps.Items {
		cl.endpoints = append(cl.endpoints, &eps.Items[i])
	}
	return cl, nil
}

// keysOf returns the Service's topology keys, or nil when it is served
// unfiltered: no annotation, or not a JSON list of 1 to 16 distinct label
// keys with "*" at most once and last.
func (cl *cluster) keysOf(service string) []string {
	svc := cl.services[service]
	if svc == nil {
		return nil
	}
	v, ok := svc.Annotations["topologyKeys"]
	if !ok {
		return nil
	}
	var keys []string
	if json.Unmarshal([]byte(v), &keys) != nil || len(keys) == 0 || len(keys) > 16 {
		return nil
	}
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			return nil
		}
		if k == "*" {
			if i != len(keys)-1 {
				return nil
			}
			continue
		}
		if len(validation.IsQualifiedName(k)) > 0 {
			return nil
		}
	}
	return keys
}

// sameUnit: endpoint on node epNode is in self's nodeunit for key.
func (cl *cluster) sameUnit(self, key string, epNode *string) bool {
	if key == "*" {
		return true
	}
	mine, ok := cl.nodes[self][key]
	if !ok || epNode == nil {
		return false
	}
	theirs, ok := cl.nodes[*epNode][key]
	return ok && theirs == mine
}

// winner is the first key matched by a usable endpoint, or "" for none.
func (cl *cluster) winner(self string, keys []string, usableNodes []*string) string {
	for _, k := range keys {
		for _, n := range usableNodes {
			if cl.sameUnit(self, k, n) {
				return k
			}
		}
	}
	return ""
}

// bare drops what the wrapper serves as its own: resourceVersion, and a
// generation kept while the served form does not change; and managedFields,
// which it drops.
func bare[T metav1.Object](o T) T {
	o.SetResourceVersion("")
	o.SetGeneration(0)
	o.SetManagedFields(nil)
	return o
}

// wantSlices: what node is served, by slice name.
func (cl *cluster) wantSlices(self string) map[string]*discoveryv1.EndpointSlice {
	usable := map[string][]*string{}
	for _, s := range cl.slices {
		svc := s.Labels[discoveryv1.LabelServiceName]
		for _, e := range s.Endpoints {
			c := e.Conditions
			if c.Ready == nil || *c.Ready || (c.Serving != nil && *c.Serving) {
				usable[svc] = append(usable[svc], e.NodeName)
			}
		}
	}
	out := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range cl.slices {
		want := bare(s.DeepCopy())
		out[s.Name] = want
		svc := s.Labels[discoveryv1.LabelServiceName]
		keys := cl.keysOf(svc)
		if svc == "" || keys == nil {
			continue
		}
		key := cl.winner(self, keys, usable[svc])
		want.Endpoints = []discoveryv1.Endpoint{}
		for _, e := range s.Endpoints {
			if key != "" && cl.sameUnit(self, key, e.NodeName) {
				e.Hints = nil
				want.Endpoints = append(want.Endpoints, e)
			}
		}
	}
	return out
}

// wantEndpoints: what node is served, by Endpoints name.
func (cl *cluster) wantEndpoints(self string) map[string]*corev1.Endpoints {
	out := map[string]*corev1.Endpoints{}
	for _, ep := range cl.endpoints {
		want := bare(ep.DeepCopy())
		out[ep.Name] = want
		keys := cl.keysOf(ep.Name)
		if keys == nil {
			continue
		}
		var usable []*string
		for _, ss := range ep.Subsets {
			for _, a := range ss.Addresses {
				usable = append(usable, a.NodeName)
			}
		}
		key := cl.winner(self, keys, usable)
		keep := func(in []corev1.EndpointAddress) (out []corev1.EndpointAddress) {
			for _, a := range in {
				if key != "" && cl.sameUnit(self, key, a.NodeName) {
					out = append(out, a)
				}
			}
			return out
		}
		want.Subsets = nil
		for _, ss := range ep.Subsets {
			ss.Addresses, ss.NotReadyAddresses = keep(ss.Addresses), keep(ss.NotReadyAddresses)
			if len(ss.Addresses)+len(ss.NotReadyAddresses) > 0 {
				want.Subsets = append(want.Subsets, ss)
			}
		}
	}
	return out
}

// diffServed compares an informer's objects of namespace ns with want,
// whole objects but for resourceVersion and managedFields.
func diffServed[T interface {
	metav1.Object
	comparable
}](store cache.Store, ns string, want map[string]T) error {
	got := map[string]T{}
	for _, o := range store.List() {
		t := o.(T)
		if t.GetNamespace() == ns {
			got[t.GetName()] = t
		}
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			return fmt.Errorf("%s not served", name)
		}
		g = bare(deepCopy(g))
		if !apiequality.Semantic.DeepEqual(g, w) {
			return fmt.Errorf("%s served as\n%+v\nwant\n%+v", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			return fmt.Errorf("%s served but gone upstream", name)
		}
	}
	return nil
}

func deepCopy[T any](o T) T {
	switch v := any(o).(type) {
	case *discoveryv1.EndpointSlice:
		return any(v.DeepCopy()).(T)
	case *corev1.Endpoints:
		return any(v.DeepCopy()).(T)
	}
	panic(fmt.Sprintf("deepCopy: %T", o))
}

// checkServed: the informers behind node's wrapper hold exactly the
// expected EndpointSlices and Endpoints of ns.
func checkServed(ctx context.Context, c kubernetes.Interface, inf *proxyInformers, ns, node string) (bool, error) {
	cl, err := readCluster(ctx, c, ns)
	if err != nil {
		return false, err
	}
	if err := diffServed(inf.slices.GetStore(), ns, cl.wantSlices(node)); err != nil {
		return false, fmt.Errorf("EndpointSlice %w", err)
	}
	if err := diffServed(inf.endpoints.GetStore(), ns, cl.wantEndpoints(node)); err != nil {
		return false, fmt.Errorf("Endpoints %w", err)
	}
	return true, nil
}

// adminClient is unthrottled: the checks above list four resources per poll.
func adminClient(cp *controlplane.ControlPlane) kubernetes.Interface {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS = -1
	return kubernetes.NewForConfigOrDie(cfg)
}
