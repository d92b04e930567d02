package gridcli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/internal/version"
)

// checkCRDs compares the cluster's superedge.io CRDs with this release's
// (the ones the controller of the same release installs and keeps).
func (d *doctor) checkCRDs(ctx context.Context) error {
	drifted, err := crds.Drifted(ctx, d.ext)
	if err != nil {
		return fmt.Errorf("checking CRDs: %w", err)
	}
	for _, name := range drifted {
		d.report.add("crd "+name, "kubectl apply --server-side -f build/crds/ of the controller's release (a controller with --manage-crds=true re-applies within --crd-check-interval)",
			"missing or different from release %s's (compare with the kubectl grid of the controller's release if they differ)", version.Version)
	}
	return nil
}

// checkLeader checks that exactly one application-grid-controller leads.
func (d *doctor) checkLeader(ctx context.Context) error {
	subject := "deployment " + controllerNamespace + "/" + controllerName
	deploy, err := orNil(d.kube.AppsV1().Deployments(controllerNamespace).Get(ctx, controllerName, metav1.GetOptions{}))
	if err != nil {
		return err
	}
	if deploy == nil {
		d.report.add(subject, "kubectl apply --server-side -k build/manifests/default (build/README.md, Install)", "missing: no grid is reconciled")
		return nil
	}
	// The controller's flag defaults (controller.DefaultOptions, which this
	// package cannot import: the controller's tests run kubectl grid).
	o := struct {
		LeaderElect                                 bool
		LeaderElectionNamespace, LeaderElectionName string
	}{true, "kube-system", controllerName}
	for _, c := range deploy.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			switch k, v, _ := strings.Cut(a, "="); k {
			case "--leader-elect":
				o.LeaderElect = v != "false"
			case "--leader-elect-namespace":
				o.LeaderElectionNamespace = v
			case "--leader-elect-name":
				o.LeaderElectionName = v
			}
		}
	}
	if deploy.Status.ReadyReplicas == 0 {
		d.report.add(subject, fmt.Sprintf("kubectl -n %s describe deployment %s; its pods' logs", controllerNamespace, controllerName), "no ready replica: no grid is reconciled")
	}
	if !o.LeaderElect {
		if deploy.Spec.Replicas != nil && *deploy.Spec.Replicas > 1 {
			d.report.add(subject, "set --leader-elect=true, or one replica", "%d replicas without leader election would all reconcile", *deploy.Spec.Replicas)
		}
		return nil
	}
	leaseSubject := "lease " + o.LeaderElectionNamespace + "/" + o.LeaderElectionName
	lease, err := orNil(d.kube.CoordinationV1().Leases(o.LeaderElectionNamespace).Get(ctx, o.LeaderElectionName, metav1.GetOptions{}))
	if err != nil {
		return err
	}
	holder := ""
	if lease != nil && lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" {
		d.report.add(leaseSubject, fmt.Sprintf("kubectl -n %s logs -l %s=%s", controllerNamespace, nameLabel, controllerName), "no controller leads: nothing reconciles grids")
		return nil
	}
	if lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil {
		expiry := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
		if time.Now().After(expiry) {
			d.report.add(leaseSubject, fmt.Sprintf("kubectl -n %s logs -l %s=%s", controllerNamespace, nameLabel, controllerName), "no controller leads: %s's lease ran out at %s", holder, expiry.UTC().Format(time.RFC3339))
			return nil
		}
	}
	// Identities are hostname_uuid; a pod's hostname is its name.
	podName, _, _ := strings.Cut(holder, "_")
	pods, err := d.kube.CoreV1().Pods(controllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: nameLabel + "=" + controllerName})
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == podName }) {
		d.report.add(leaseSubject, "find what holds it (another controller outside "+controllerNamespace+"?) and stop it", "held by %q, which is not a pod of %s", holder, subject)
	}
	return nil
}

// superEdgeLeftovers are what SuperEdge's manifests run in edge-system
// (build/MIGRATION.md): they hold the wrapper's port, write its hosts
// file, or reconcile the same grids.
var superEdgeLeftovers = []struct{ kind, name, does string }{
	{"deployment", "application-grid-controller", "SuperEdge's controller reconciles the same grids"},
	{"daemonset", "application-grid-wrapper-node", "SuperEdge's wrapper holds 127.0.0.1:51006 on edge nodes"},
	{"daemonset", "application-grid-wrapper-master", "SuperEdge's wrapper holds 127.0.0.1:51006 on cloud nodes"},
	{"daemonset", "edge-coredns", "SuperEdge's CoreDNS answers from a hosts file"},
	{"daemonset", "statefulset-grid-daemon", "SuperEdge's hosts daemon writes that hosts file"},
	{"serviceaccount", "application-grid-wrapper", "SuperEdge's wrapper's account"},
	{"clusterrolebinding", "application-grid-wrapper", "SuperEdge's binding gives every verb on Secrets"},
}

// ourWrapperRoles are the cluster roles our manifests bind the wrapper's
// ServiceAccount to.
var ourWrapperRoles = []string{"servicegroup:application-grid-wrapper", "system:auth-delegator"}

// checkSuperEdgeLeftovers finds SuperEdge's workloads and RBAC, and any
// ClusterRoleBinding giving our wrapper's ServiceAccount more than ours.
func (d *doctor) checkSuperEdgeLeftovers(ctx context.Context) error {
	for _, l := range superEdgeLeftovers {
		var found bool
		subject, fix := l.kind+" "+edgeNamespace+"/"+l.name, fmt.Sprintf("kubectl -n %s delete %s %s, once every node moved (build/MIGRATION.md)", edgeNamespace, l.kind, l.name)
		switch l.kind {
		case "deployment":
			obj, err := orNil(d.kube.AppsV1().Deployments(edgeNamespace).Get(ctx, l.name, metav1.GetOptions{}))
			if err != nil {
				return err
			}
			found = obj != nil
		case "serviceaccount":
			obj, err := orNil(d.kube.CoreV1().ServiceAccounts(edgeNamespace).Get(ctx, l.name, metav1.GetOptions{}))
			if err != nil {
				return err
			}
			found = obj != nil
		case "clusterrolebinding":
			obj, err := orNil(d.kube.RbacV1().ClusterRoleBindings().Get(ctx, l.name, metav1.GetOptions{}))
			if err != nil {
				return err
			}
			found = obj != nil
			subject, fix = l.kind+" "+l.name, fmt.Sprintf("kubectl delete %s %s, once every node moved (build/MIGRATION.md)", l.kind, l.name)
		default:
			obj, err := orNil(d.kube.AppsV1().DaemonSets(edgeNamespace).Get(ctx, l.name, metav1.GetOptions{}))
			if err != nil {
				return err
			}
			found = obj != nil
		}
		if found {
			d.report.add(subject, fix, "SuperEdge leftover: %s", l.does)
		}
	}
	bindings, err := d.kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	for _, b := range bindings.Items {
		if slices.Contains(ourWrapperRoles, b.RoleRef.Name) {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Namespace == edgeNamespace && s.Name == wrapperServiceAccount {
				d.report.add("clusterrolebinding "+b.Name, "kubectl delete clusterrolebinding "+b.Name,
					"gives the wrapper's ServiceAccount %s/%s the ClusterRole %s beyond what it needs", edgeNamespace, wrapperServiceAccount, b.RoleRef.Name)
			}
		}
	}
	return nil
}
