package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// statefulSetGrids is the StatefulSetGrid kind: one StatefulSet per nodeunit.
type statefulSetGrids struct{}

// newStatefulSetGridController keeps one StatefulSet per nodeunit for every StatefulSetGrid.
func newStatefulSetGridController(deps Deps) (*gridController[*superedgev1.StatefulSetGrid, *appsv1.StatefulSet, *appsv1apply.StatefulSetApplyConfiguration], error) {
	grids := deps.GridInformers.Superedge().V1().StatefulSetGrids().Informer()
	children := deps.KubeInformers.Apps().V1().StatefulSets().Informer()
	store := newKindStore(
		grids, superedgev1.Resource("statefulsetgrid"),
		func(ns string) gridAPI[*superedgev1.StatefulSetGrid] {
			return deps.Grids.SuperedgeV1().StatefulSetGrids(ns)
		},
		children, appsv1.Resource("statefulset"),
		func(ns string) childAPI[*appsv1.StatefulSet, *appsv1apply.StatefulSetApplyConfiguration] {
			return deps.Kube.AppsV1().StatefulSets(ns)
		},
		appsv1apply.ExtractStatefulSet, func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} })
	return newWorkloadGridController(deps, "StatefulSet", statefulSetGrids{}, store, grids, children)
}

func (statefulSetGrids) spec(g *superedgev1.StatefulSetGrid) (string, *superedgev1.WorkloadGridSpecCommon) {
	return g.Spec.GridUniqKey, &g.Spec.WorkloadGridSpecCommon
}

func (statefulSetGrids) templateJSON(g *superedgev1.StatefulSetGrid, name string) ([]byte, error) {
	return templateJSON(g.Spec.Template, g.Spec.TemplatePool, name)
}

func (statefulSetGrids) status(g *superedgev1.StatefulSetGrid) *superedgev1.WorkloadGridStatusCommon {
	return &g.Status.WorkloadGridStatusCommon
}

func (statefulSetGrids) statusWith(g *superedgev1.StatefulSetGrid, kept []child[*appsv1.StatefulSet], nodeUnits int32, common superedgev1.WorkloadGridStatusCommon) (*superedgev1.StatefulSetGrid, bool) {
	st := superedgev1.StatefulSetGridStatus{ObservedGeneration: g.Generation, States: childStates(kept, statefulSetState),
		NodeUnits: nodeUnits, WorkloadGridStatusCommon: common}
	return copyWithStatus(g, st, func(g *superedgev1.StatefulSetGrid) *superedgev1.StatefulSetGridStatus { return &g.Status })
}

func (statefulSetGrids) validName(name string) error { return validStatefulSetName(name) }

// desired is the StatefulSet a StatefulSetGrid wants in one nodeunit.
// spec.serviceName stays the template's: the gridhosts DNS plugin maps the
// unified names onto each nodeunit's pods.
func (statefulSetGrids) desired(g *superedgev1.StatefulSetGrid, u unit) (*appsv1apply.StatefulSetApplyConfiguration, error) {
	spec := &appsv1apply.StatefulSetSpecApplyConfiguration{}
	if err := unitSpec(g.Spec.Template, g.Spec.TemplatePool, u, spec); err != nil {
		return nil, err
	}
	spec.Template = pinToNodeUnit(spec.Template, g.Spec.GridUniqKey, u.value)
	// Claim templates carry an empty status in their typed form: not ours to set.
	for i := range spec.VolumeClaimTemplates {
		spec.VolumeClaimTemplates[i].Status = nil
	}
	cfg, err := ownedChild(appsv1apply.StatefulSet(u.name, g.Namespace).WithSpec(spec), g, "StatefulSetGrid", g.Spec.GridUniqKey)
	if err != nil {
		return nil, err
	}
	// The nodeunit label stays out of the applied hash: adding it to the
	// children of an older controller or of SuperEdge is a metadata write,
	// never a new revision for a staged rollout to plan.
	return cfg.WithLabels(map[string]string{superedgev1.LabelGridNodeUnit: u.value}), nil
}

// statefulSetState is a StatefulSet's line in its grid's status.states.
func statefulSetState(set *appsv1.StatefulSet) superedgev1.StatefulSetState {
	s := set.Status
	var sc []appsv1.StatefulSetCondition
	for i := range s.Conditions {
		sc = append(sc, *s.Conditions[i].DeepCopy())
	}
	return superedgev1.StatefulSetState{
		ObservedGeneration: s.ObservedGeneration, Replicas: s.Replicas, ReadyReplicas: s.ReadyReplicas,
		CurrentReplicas: s.CurrentReplicas, UpdatedReplicas: s.UpdatedReplicas, AvailableReplicas: s.AvailableReplicas,
		CurrentRevision: s.CurrentRevision, UpdateRevision: s.UpdateRevision, Conditions: sc,
	}
}

// ready: the StatefulSet controller has seen the current spec and every
// wanted replica runs the update revision and is ready.
func (statefulSetGrids) ready(s *appsv1.StatefulSet) bool {
	want := ptr.Deref(s.Spec.Replicas, 1)
	st := s.Status
	return st.ObservedGeneration >= s.Generation && st.ReadyReplicas == want && st.UpdatedReplicas == want && st.Replicas == want
}

// healthy: fully rolled out: the spec observed, every wanted replica
// updated, ready and available, and the update revision current.
func (statefulSetGrids) healthy(s *appsv1.StatefulSet) bool {
	want := ptr.Deref(s.Spec.Replicas, 1)
	st := s.Status
	return st.ObservedGeneration >= s.Generation && st.Replicas == want && st.UpdatedReplicas == want &&
		st.ReadyReplicas == want && st.AvailableReplicas == want && st.CurrentRevision == st.UpdateRevision
}

// failure: StatefulSets report no progress deadline of their own; the
// rollout's deadline decides.
func (statefulSetGrids) failure(*appsv1.StatefulSet) string { return "" }
