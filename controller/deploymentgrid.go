package controller

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// newDeploymentGridController keeps one Deployment per nodeunit for every DeploymentGrid.
func newDeploymentGridController(deps Deps) (*gridController[*superedgev1.DeploymentGrid, *appsv1.Deployment, *appsv1apply.DeploymentApplyConfiguration], error) {
	grids := deps.GridInformers.Superedge().V1().DeploymentGrids()
	children := deps.KubeInformers.Apps().V1().Deployments()
	nodes := deps.KubeInformers.Core().V1().Nodes()
	const kind = "DeploymentGrid"
	if err := wireIndexes(grids.Informer(), children.Informer(), nodes.Informer(), kind,
		func(g *superedgev1.DeploymentGrid) string { return g.Spec.GridUniqKey }); err != nil {
		return nil, err
	}
	units := nodeUnits{indexer: nodes.Informer().GetIndexer()}

	ops := kindOps[*superedgev1.DeploymentGrid, *appsv1.Deployment, *appsv1apply.DeploymentApplyConfiguration]{
		kind:      kind,
		childKind: "Deployment",
		kindAccess: newKindAccess(grids.Lister().DeploymentGrids, deps.Grids.SuperedgeV1().DeploymentGrids,
			children.Informer(), children.Lister().Deployments, deps.Kube.AppsV1().Deployments,
			appsv1apply.ExtractDeployment, func() *appsv1.Deployment { return &appsv1.Deployment{} }),
		gridKey: func(g *superedgev1.DeploymentGrid) string { return g.Spec.GridUniqKey },
		units: func(g *superedgev1.DeploymentGrid) []unit {
			return workloadUnits(g.Name, units.values(g.Spec.GridUniqKey), g.Spec.Templates, g.Spec.DefaultTemplateName)
		},
		validName:   validDeploymentName,
		desired:     desiredDeployment,
		recreatable: true,
		ready:       deploymentReady,
		healthy:     deploymentHealthy,
		failure:     deploymentFailure,
		strategy:    func(g *superedgev1.DeploymentGrid) *superedgev1.RolloutStrategy { return g.Spec.Rollout },
		rollout: func(g *superedgev1.DeploymentGrid) (*superedgev1.RolloutStatus, []superedgev1.NodeUnitStatus) {
			return g.Status.Rollout, g.Status.Units
		},
		templateJSON: func(g *superedgev1.DeploymentGrid, name string) ([]byte, error) {
			return templateJSON(g.Spec.Template, g.Spec.TemplatePool, name)
		},
		conditions: func(g *superedgev1.DeploymentGrid) []metav1.Condition { return g.Status.Conditions },
		status: func(g *superedgev1.DeploymentGrid, kept []child[*appsv1.Deployment], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) (*superedgev1.DeploymentGrid, bool) {
			st := superedgev1.DeploymentGridStatus{ObservedGeneration: g.Generation, Conditions: conds, Rollout: rollout}
			for _, ch := range kept {
				if st.States == nil {
					st.States = map[string]superedgev1.DeploymentState{}
				}
				s := ch.obj.Status
				st.States[ch.value] = superedgev1.DeploymentState{
					ObservedGeneration: s.ObservedGeneration, Replicas: s.Replicas, UpdatedReplicas: s.UpdatedReplicas,
					ReadyReplicas: s.ReadyReplicas, AvailableReplicas: s.AvailableReplicas, UnavailableReplicas: s.UnavailableReplicas,
					Conditions: deepCopyDeploymentConditions(s.Conditions),
				}
			}
			st.NodeUnits, st.ReadyNodeUnits, st.Units = unitCounts(kept, deploymentReady)
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

// desiredDeployment is the Deployment a DeploymentGrid wants in one nodeunit.
func desiredDeployment(g *superedgev1.DeploymentGrid, u unit) (*appsv1apply.DeploymentApplyConfiguration, error) {
	tmpl, err := unitTemplate(g.Spec.Template, g.Spec.TemplatePool, u)
	if err != nil {
		return nil, err
	}
	spec := &appsv1apply.DeploymentSpecApplyConfiguration{}
	if err := fromTemplate(tmpl, spec); err != nil {
		return nil, fmt.Errorf("template %q: %w", u.template, err)
	}
	spec.Template = pinToNodeUnit(spec.Template, g.Spec.GridUniqKey, u.value)
	d := appsv1apply.Deployment(u.name, g.Namespace).
		WithLabels(g.Labels).
		WithLabels(gridLabels(g.Name, g.Spec.GridUniqKey)).
		WithAnnotations(gridAnnotations(g.Spec.GridUniqKey)).
		WithOwnerReferences(ownerReference(g, "DeploymentGrid")).
		WithSpec(spec)
	return stampHash(d, d.WithAnnotations)
}

// deploymentReady: the Deployment controller has seen the current spec and
// every wanted replica is updated and available.
func deploymentReady(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}

func deepCopyDeploymentConditions(in []appsv1.DeploymentCondition) []appsv1.DeploymentCondition {
	if in == nil {
		return nil
	}
	out := make([]appsv1.DeploymentCondition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// deploymentHealthy: fully rolled out, the bar a rollout wave must pass: the
// spec observed and every wanted replica updated, ready and available.
func deploymentHealthy(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want
}

// deploymentFailure is the Deployment controller's own verdict that the
// rollout is stuck (its progressDeadlineSeconds passed), or "".
func deploymentFailure(d *appsv1.Deployment) string {
	if d.Status.ObservedGeneration < d.Generation {
		return ""
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == "False" && c.Reason == "ProgressDeadlineExceeded" {
			return c.Reason
		}
	}
	return ""
}
