package controller

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// newStatefulSetGridController keeps one StatefulSet per nodeunit for every StatefulSetGrid.
func newStatefulSetGridController(deps Deps) (*gridController[*superedgev1.StatefulSetGrid, *appsv1.StatefulSet, *appsv1apply.StatefulSetApplyConfiguration], error) {
	grids := deps.GridInformers.Superedge().V1().StatefulSetGrids()
	children := deps.KubeInformers.Apps().V1().StatefulSets()
	nodes := deps.KubeInformers.Core().V1().Nodes()
	const kind = "StatefulSetGrid"
	if err := wireIndexes(grids.Informer(), children.Informer(), nodes.Informer(), kind,
		func(g *superedgev1.StatefulSetGrid) string { return g.Spec.GridUniqKey }); err != nil {
		return nil, err
	}
	units := nodeUnits{indexer: nodes.Informer().GetIndexer()}

	ops := kindOps[*superedgev1.StatefulSetGrid, *appsv1.StatefulSet, *appsv1apply.StatefulSetApplyConfiguration]{
		kind:      kind,
		childKind: "StatefulSet",
		kindAccess: newKindAccess(grids.Lister().StatefulSetGrids, deps.Grids.SuperedgeV1().StatefulSetGrids,
			children.Informer(), children.Lister().StatefulSets, deps.Kube.AppsV1().StatefulSets,
			appsv1apply.ExtractStatefulSet, func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} }),
		gridKey: func(g *superedgev1.StatefulSetGrid) string { return g.Spec.GridUniqKey },
		units: func(g *superedgev1.StatefulSetGrid) []unit {
			return workloadUnits(g.Name, units.values(g.Spec.GridUniqKey), g.Spec.Templates, g.Spec.DefaultTemplateName)
		},
		validName:   validStatefulSetName,
		desired:     desiredStatefulSet,
		recreatable: true,
		ready:       statefulSetReady,
		healthy:     statefulSetHealthy,
		failure:     statefulSetFailure,
		strategy:    func(g *superedgev1.StatefulSetGrid) *superedgev1.RolloutStrategy { return g.Spec.Rollout },
		rollout: func(g *superedgev1.StatefulSetGrid) (*superedgev1.RolloutStatus, []superedgev1.NodeUnitStatus) {
			return g.Status.Rollout, g.Status.Units
		},
		templateJSON: func(g *superedgev1.StatefulSetGrid, name string) ([]byte, error) {
			return templateJSON(g.Spec.Template, g.Spec.TemplatePool, name)
		},
		conditions: func(g *superedgev1.StatefulSetGrid) []metav1.Condition { return g.Status.Conditions },
		status: func(g *superedgev1.StatefulSetGrid, kept []child[*appsv1.StatefulSet], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) (*superedgev1.StatefulSetGrid, bool) {
			st := superedgev1.StatefulSetGridStatus{ObservedGeneration: g.Generation, Conditions: conds, Rollout: rollout}
			for _, ch := range kept {
				if st.States == nil {
					st.States = map[string]superedgev1.StatefulSetState{}
				}
				s := ch.obj.Status
				var sc []appsv1.StatefulSetCondition
				for i := range s.Conditions {
					sc = append(sc, *s.Conditions[i].DeepCopy())
				}
				st.States[ch.value] = superedgev1.StatefulSetState{
					ObservedGeneration: s.ObservedGeneration, Replicas: s.Replicas, ReadyReplicas: s.ReadyReplicas,
					CurrentReplicas: s.CurrentReplicas, UpdatedReplicas: s.UpdatedReplicas, AvailableReplicas: s.AvailableReplicas,
					CurrentRevision: s.CurrentRevision, UpdateRevision: s.UpdateRevision, Conditions: sc,
				}
			}
			st.NodeUnits, st.ReadyNodeUnits, st.Units = unitCounts(kept, statefulSetReady)
			if statusEqual(g.Status, st) {
				return g, false
			}
			ng := g.DeepCopy()
			ng.Status = st
			return ng, true
		},
	}
	c := newGridController(ops, deps)
	if err := register(c, grids.Informer(), children.Informer(), nodes.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// desiredStatefulSet is the StatefulSet a StatefulSetGrid wants in one nodeunit.
// spec.serviceName stays the template's: the gridhosts DNS plugin maps the
// unified names onto each nodeunit's pods.
func desiredStatefulSet(g *superedgev1.StatefulSetGrid, u unit) (*appsv1apply.StatefulSetApplyConfiguration, error) {
	tmpl, err := unitTemplate(g.Spec.Template, g.Spec.TemplatePool, u)
	if err != nil {
		return nil, err
	}
	spec := &appsv1apply.StatefulSetSpecApplyConfiguration{}
	if err := fromTemplate(tmpl, spec); err != nil {
		return nil, fmt.Errorf("template %q: %w", u.template, err)
	}
	spec.Template = pinToNodeUnit(spec.Template, g.Spec.GridUniqKey, u.value)
	// Claim templates carry an empty status in their typed form: not ours to set.
	for i := range spec.VolumeClaimTemplates {
		spec.VolumeClaimTemplates[i].Status = nil
	}
	s := appsv1apply.StatefulSet(u.name, g.Namespace).
		WithLabels(g.Labels).
		WithLabels(gridLabels(g.Name, g.Spec.GridUniqKey)).
		WithAnnotations(gridAnnotations(g.Spec.GridUniqKey)).
		WithOwnerReferences(ownerReference(g, "StatefulSetGrid")).
		WithSpec(spec)
	return stampHash(s, s.WithAnnotations)
}

// statefulSetReady: the StatefulSet controller has seen the current spec and
// every wanted replica runs the update revision and is ready.
func statefulSetReady(s *appsv1.StatefulSet) bool {
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	st := s.Status
	return st.ObservedGeneration >= s.Generation && st.ReadyReplicas == want && st.UpdatedReplicas == want && st.Replicas == want
}

// statefulSetHealthy: fully rolled out: the spec observed, every wanted
// replica updated, ready and available, and the update revision current.
func statefulSetHealthy(s *appsv1.StatefulSet) bool {
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	st := s.Status
	return st.ObservedGeneration >= s.Generation && st.Replicas == want && st.UpdatedReplicas == want &&
		st.ReadyReplicas == want && st.AvailableReplicas == want && st.CurrentRevision == st.UpdateRevision
}

// statefulSetFailure: StatefulSets report no progress deadline of their
// own; the rollout's deadline decides.
func statefulSetFailure(*appsv1.StatefulSet) string { return "" }
