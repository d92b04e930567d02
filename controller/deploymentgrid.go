package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// newDeploymentGridController keeps one Deployment per nodeunit for every DeploymentGrid.
func newDeploymentGridController(deps Deps) (*gridController[*superedgev1.DeploymentGrid, *appsv1.Deployment, *appsv1apply.DeploymentApplyConfiguration], error) {
	grids := deps.GridInformers.Superedge().V1().DeploymentGrids()
	children := deps.KubeInformers.Apps().V1().Deployments()
	return newWorkloadGridController(deps, workloadKind[*superedgev1.DeploymentGrid, *appsv1.Deployment, *appsv1apply.DeploymentApplyConfiguration, appsv1.DeploymentSpec, superedgev1.DeploymentGridStatus]{
		childKind: "Deployment",
		grids:     grids.Informer(),
		children:  children.Informer(),
		access: newKindAccess(grids.Lister().DeploymentGrids, deps.Grids.SuperedgeV1().DeploymentGrids,
			children.Informer(), children.Lister().Deployments, deps.Kube.AppsV1().Deployments,
			appsv1apply.ExtractDeployment, func() *appsv1.Deployment { return &appsv1.Deployment{} }),
		spec: func(g *superedgev1.DeploymentGrid) workloadSpec[appsv1.DeploymentSpec] {
			return workloadSpec[appsv1.DeploymentSpec]{g.Spec.GridUniqKey, &g.Spec.WorkloadGridSpecCommon, &g.Spec.Template, g.Spec.TemplatePool}
		},
		status: func(g *superedgev1.DeploymentGrid) *superedgev1.DeploymentGridStatus { return &g.Status },
		shared: func(g *superedgev1.DeploymentGrid) *superedgev1.WorkloadGridStatusCommon {
			return &g.Status.WorkloadGridStatusCommon
		},
		newStatus: func(g *superedgev1.DeploymentGrid, kept []child[*appsv1.Deployment], nodeUnits int32, shared superedgev1.WorkloadGridStatusCommon) superedgev1.DeploymentGridStatus {
			return superedgev1.DeploymentGridStatus{ObservedGeneration: g.Generation, States: childStates(kept, deploymentState),
				NodeUnits: nodeUnits, WorkloadGridStatusCommon: shared}
		},
		validName: validDeploymentName,
		desired:   desiredDeployment,
		ready:     deploymentReady,
		healthy:   deploymentHealthy,
		failure:   deploymentFailure,
	})
}

// desiredDeployment is the Deployment a DeploymentGrid wants in one nodeunit.
func desiredDeployment(g *superedgev1.DeploymentGrid, u unit) (*appsv1apply.DeploymentApplyConfiguration, error) {
	spec := &appsv1apply.DeploymentSpecApplyConfiguration{}
	if err := unitSpec(g.Spec.Template, g.Spec.TemplatePool, u, spec); err != nil {
		return nil, err
	}
	spec.Template = pinToNodeUnit(spec.Template, g.Spec.GridUniqKey, u.value)
	return ownedChild(appsv1apply.Deployment(u.name, g.Namespace).WithSpec(spec), g, "DeploymentGrid", g.Spec.GridUniqKey)
}

// deploymentState is a Deployment's line in its grid's status.states.
func deploymentState(d *appsv1.Deployment) superedgev1.DeploymentState {
	s := d.Status
	return superedgev1.DeploymentState{
		ObservedGeneration: s.ObservedGeneration, Replicas: s.Replicas, UpdatedReplicas: s.UpdatedReplicas,
		ReadyReplicas: s.ReadyReplicas, AvailableReplicas: s.AvailableReplicas, UnavailableReplicas: s.UnavailableReplicas,
		Conditions: deepCopyDeploymentConditions(s.Conditions),
	}
}

// deploymentReady: the Deployment controller has seen the current spec and
// every wanted replica is updated and available.
func deploymentReady(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
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
	want := ptr.Deref(d.Spec.Replicas, 1)
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
