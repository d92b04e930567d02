package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// deploymentGrids is the DeploymentGrid kind: one Deployment per nodeunit.
type deploymentGrids struct{}

// newDeploymentGridController keeps one Deployment per nodeunit for every DeploymentGrid.
func newDeploymentGridController(deps Deps) (*gridController[*superedgev1.DeploymentGrid, *appsv1.Deployment, *appsv1apply.DeploymentApplyConfiguration], error) {
	grids := deps.GridInformers.Superedge().V1().DeploymentGrids().Informer()
	children := deps.KubeInformers.Apps().V1().Deployments().Informer()
	store := newKindStore(
		grids, superedgev1.Resource("deploymentgrid"),
		func(ns string) gridAPI[*superedgev1.DeploymentGrid] {
			return deps.Grids.SuperedgeV1().DeploymentGrids(ns)
		},
		children, appsv1.Resource("deployment"),
		func(ns string) childAPI[*appsv1.Deployment, *appsv1apply.DeploymentApplyConfiguration] {
			return deps.Kube.AppsV1().Deployments(ns)
		},
		appsv1apply.ExtractDeployment, func() *appsv1.Deployment { return &appsv1.Deployment{} })
	return newWorkloadGridController(deps, "Deployment", deploymentGrids{}, store, grids, children)
}

func (deploymentGrids) spec(g *superedgev1.DeploymentGrid) (string, *superedgev1.WorkloadGridSpecCommon) {
	return g.Spec.GridUniqKey, &g.Spec.WorkloadGridSpecCommon
}

func (deploymentGrids) templateJSON(g *superedgev1.DeploymentGrid, name string) ([]byte, error) {
	return templateJSON(g.Spec.Template, g.Spec.TemplatePool, name)
}

func (deploymentGrids) status(g *superedgev1.DeploymentGrid) *superedgev1.WorkloadGridStatusCommon {
	return &g.Status.WorkloadGridStatusCommon
}

func (deploymentGrids) statusWith(g *superedgev1.DeploymentGrid, kept []child[*appsv1.Deployment], nodeUnits int32, common superedgev1.WorkloadGridStatusCommon) (*superedgev1.DeploymentGrid, bool) {
	st := superedgev1.DeploymentGridStatus{ObservedGeneration: g.Generation, States: childStates(kept, deploymentState),
		NodeUnits: nodeUnits, WorkloadGridStatusCommon: common}
	return copyWithStatus(g, st, func(g *superedgev1.DeploymentGrid) *superedgev1.DeploymentGridStatus { return &g.Status })
}

func (deploymentGrids) validName(name string) error { return validDeploymentName(name) }

// desired is the Deployment a DeploymentGrid wants in one nodeunit.
func (deploymentGrids) desired(g *superedgev1.DeploymentGrid, u unit) (*appsv1apply.DeploymentApplyConfiguration, error) {
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

// ready: the Deployment controller has seen the current spec and every
// wanted replica is updated and available.
func (deploymentGrids) ready(d *appsv1.Deployment) bool {
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

// healthy: fully rolled out, the bar a rollout wave must pass: the spec
// observed and every wanted replica updated, ready and available.
func (deploymentGrids) healthy(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want
}

// failure is the Deployment controller's own verdict that the rollout is
// stuck (its progressDeadlineSeconds passed), or "".
func (deploymentGrids) failure(d *appsv1.Deployment) string {
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
