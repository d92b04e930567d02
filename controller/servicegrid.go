package controller

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/trafficmode"
)

// serviceGrids is the ServiceGrid kind: one Service, {grid}-svc, for every
// ServiceGrid. The Service does not depend on nodes: in the wrapper mode the
// wrapper filters its endpoints per node by the topologyKeys annotation, in
// the native mode the data plane prefers the caller's zone
// (trafficDistribution), which zonelabels.go keeps equal to the nodeunit.
// A ServiceGrid has no rollout: its one Service changes at once.
type serviceGrids struct {
	// zoneFromGridKey is --zone-from-grid-key ("": zones are not written).
	zoneFromGridKey string
}

// newServiceGridController keeps one Service for every ServiceGrid.
func newServiceGridController(deps Deps) (*gridController[*superedgev1.ServiceGrid, *corev1.Service, *corev1apply.ServiceApplyConfiguration], error) {
	grids := deps.GridInformers.Superedge().V1().ServiceGrids().Informer()
	children := deps.KubeInformers.Core().V1().Services().Informer()
	const kind = "ServiceGrid"
	k := serviceGrids{zoneFromGridKey: deps.ZoneFromGridKey}
	if err := wireIndexes(grids, children, nil, kind, k.gridKey); err != nil {
		return nil, err
	}
	store := newKindStore(
		grids, superedgev1.Resource("servicegrid"),
		func(ns string) gridAPI[*superedgev1.ServiceGrid] { return deps.Grids.SuperedgeV1().ServiceGrids(ns) },
		children, corev1.Resource("service"),
		func(ns string) childAPI[*corev1.Service, *corev1apply.ServiceApplyConfiguration] {
			return deps.Kube.CoreV1().Services(ns)
		},
		corev1apply.ExtractService, func() *corev1.Service { return &corev1.Service{} })
	c := newGridController(deps, kind, "Service", k, store)
	if err := register(c, grids, children, nil); err != nil {
		return nil, err
	}
	return c, nil
}

func (serviceGrids) gridKey(g *superedgev1.ServiceGrid) string { return g.Spec.GridUniqKey }

func (serviceGrids) units(g *superedgev1.ServiceGrid) []unit {
	return []unit{{name: serviceName(g.Name)}}
}

func (serviceGrids) validName(name string) error { return validServiceName(name) }

// refused: an unknown traffic mode, or the native mode on a key the zones
// do not come from (its traffic would be kept in some other grouping).
func (k serviceGrids) refused(g *superedgev1.ServiceGrid) (string, error) {
	mode, err := trafficmode.Of(g.Annotations)
	if err != nil {
		return ReasonInvalidTrafficMode, fmt.Errorf("%w; the Service is left as it is", err)
	}
	if mode == trafficmode.Native {
		if err := trafficmode.NativeKeyError(g.Spec.GridUniqKey, k.zoneFromGridKey); err != nil {
			return ReasonNativeModeKeyNotZoneSource, err
		}
	}
	return "", nil
}

// ready: a Service is ready once it exists.
func (serviceGrids) ready(*corev1.Service) bool { return true }

func (serviceGrids) conditions(g *superedgev1.ServiceGrid) []metav1.Condition {
	return g.Status.Conditions
}

func (serviceGrids) withStatus(g *superedgev1.ServiceGrid, kept []child[*corev1.Service], conds []metav1.Condition, _ *superedgev1.RolloutStatus) (*superedgev1.ServiceGrid, bool) {
	st := superedgev1.ServiceGridStatus{ObservedGeneration: g.Generation, Conditions: conds}
	for _, ch := range kept {
		st.ServiceName = ch.obj.Name
		st.ClusterIP = ch.obj.Spec.ClusterIP
	}
	return copyWithStatus(g, st, func(g *superedgev1.ServiceGrid) *superedgev1.ServiceGridStatus { return &g.Status })
}

// foldable: never; a ServiceGrid's status is small, and each of its changes
// (the Service's name and clusterIP, the conditions) is worth writing at once.
func (serviceGrids) foldable(_, _ *superedgev1.ServiceGrid) bool { return false }

// topologyKeys is the annotation value that keeps traffic in the nodeunit.
func topologyKeys(key string) string {
	data, _ := json.Marshal([]string{key})
	return string(data)
}

// desired is the Service a ServiceGrid wants. clusterIP(s) and nodePorts
// are set only when the template sets them, so the allocated ones of an
// existing Service stay. The wrapper mode adds the topologyKeys annotation;
// the native mode trafficDistribution PreferSameZone instead, unless the
// template chose a distribution itself. Switching modes is one apply: the
// field of the other mode is no longer applied, so it leaves the Service.
func (serviceGrids) desired(g *superedgev1.ServiceGrid, u unit) (*corev1apply.ServiceApplyConfiguration, error) {
	spec := &corev1apply.ServiceSpecApplyConfiguration{}
	if err := fromTemplate(g.Spec.Template, spec); err != nil {
		return nil, fmt.Errorf("spec.template: %w", err)
	}
	// A zero targetPort means "same as port": leave it to the apiserver's default.
	for i := range spec.Ports {
		if tp := spec.Ports[i].TargetPort; tp != nil && tp.IntValue() == 0 && tp.StrVal == "" {
			spec.Ports[i].TargetPort = nil
		}
	}
	s := corev1apply.Service(u.name, g.Namespace).
		WithAnnotations(withoutLastApplied(g.Annotations)).
		WithSpec(spec)
	mode, err := trafficmode.Of(g.Annotations)
	if err != nil {
		return nil, err
	}
	switch mode {
	case trafficmode.Native:
		if spec.TrafficDistribution == nil {
			spec.WithTrafficDistribution(corev1.ServiceTrafficDistributionPreferSameZone)
		}
	default:
		s.WithAnnotations(map[string]string{superedgev1.AnnotationTopologyKeys: topologyKeys(g.Spec.GridUniqKey)})
	}
	return ownedChild(s, g, "ServiceGrid", g.Spec.GridUniqKey)
}

// withoutLastApplied drops kubectl's copy of the grid itself, which has no
// business on the Service.
func withoutLastApplied(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k == corev1.LastAppliedConfigAnnotation {
			continue
		}
		out[k] = v
	}
	return out
}
