package gridcli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/internal/controllerlease"
	"github.com/servicegroup/servicegroup/internal/version"
)

// checkCRDs compares the cluster's superedge.io CRDs with the schemas the
// leading controller was built with (published on its Lease); with no
// leader publishing them, with this release's.
func (d *doctor) checkCRDs(ctx context.Context) error {
	l, err := d.controllerLease(ctx)
	if err != nil {
		return err
	}
	pub, ok := l.published()
	if !ok {
		drifted, err := crds.Drifted(ctx, d.ext)
		if err != nil {
			return fmt.Errorf("checking CRDs: %w", err)
		}
		for _, name := range drifted {
			d.report.add("crd "+name, "kubectl apply --server-side -k build/crds of the controller's release (a controller with --manage-crds=true re-applies within --crd-check-interval)",
				"missing or different from release %s's (no leading controller says which schema it was built with)", version.Version)
		}
		return nil
	}
	d.report.ControllerVersion = pub.Version
	fix := fmt.Sprintf("kubectl apply --server-side -k build/crds of release %s, the leading controller's (with --manage-crds=true it re-applies them within --crd-check-interval)", pub.Version)
	for _, name := range slices.Sorted(maps.Keys(pub.CRDs)) {
		live, err := orNil(d.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{}))
		if err != nil {
			return fmt.Errorf("checking CRDs: %w", err)
		}
		if live == nil {
			d.report.add("crd "+name, fix, "missing: the leading controller %s (release %s) needs it", l.holder, pub.Version)
			continue
		}
		fp, err := crds.Fingerprint(&live.Spec)
		if err != nil {
			return fmt.Errorf("crd %s: %w", name, err)
		}
		if fp != pub.CRDs[name] {
			d.report.add("crd "+name, fix, "differs from the schema the leading controller %s (release %s) was built with", l.holder, pub.Version)
		}
	}
	return nil
}

// leaseState is the controller's Deployment, the leader-election settings
// of its flags and the Lease they name.
type leaseState struct {
	deploy *appsv1.Deployment // nil: no controller installed
	opts   struct {
		LeaderElect                                 bool
		LeaderElectionNamespace, LeaderElectionName string
	}
	lease  *coordinationv1.Lease
	holder string
	// expired is when a held Lease ran out (zero: live or not held).
	expired time.Time
}

// published is what the live leader published on its Lease.
func (l *leaseState) published() (controllerlease.Published, bool) {
	if l.lease == nil || l.holder == "" || !l.expired.IsZero() {
		return controllerlease.Published{}, false
	}
	return controllerlease.Read(l.lease)
}

// controllerLease reads the controller's Deployment and Lease once per run.
func (d *doctor) controllerLease(ctx context.Context) (*leaseState, error) {
	if d.lease != nil {
		return d.lease, nil
	}
	l := &leaseState{}
	deploy, err := orNil(d.kube.AppsV1().Deployments(controllerNamespace).Get(ctx, controllerName, metav1.GetOptions{}))
	if err != nil {
		return nil, err
	}
	l.deploy = deploy
	l.opts.LeaderElect, l.opts.LeaderElectionNamespace, l.opts.LeaderElectionName = controllerlease.DefaultLeaderElect, controllerlease.DefaultNamespace, controllerlease.DefaultName
	if deploy != nil {
		for _, c := range deploy.Spec.Template.Spec.Containers {
			for _, a := range c.Args {
				switch k, v, _ := strings.Cut(a, "="); k {
				case "--leader-elect":
					l.opts.LeaderElect = v != "false"
				case "--leader-elect-namespace":
					l.opts.LeaderElectionNamespace = v
				case "--leader-elect-name":
					l.opts.LeaderElectionName = v
				}
			}
		}
	}
	if deploy != nil && l.opts.LeaderElect {
		l.lease, err = orNil(d.kube.CoordinationV1().Leases(l.opts.LeaderElectionNamespace).Get(ctx, l.opts.LeaderElectionName, metav1.GetOptions{}))
		if err != nil {
			return nil, err
		}
	}
	if l.lease != nil && l.lease.Spec.HolderIdentity != nil {
		l.holder = *l.lease.Spec.HolderIdentity
	}
	if l.holder != "" && l.lease.Spec.RenewTime != nil && l.lease.Spec.LeaseDurationSeconds != nil {
		expiry := l.lease.Spec.RenewTime.Add(time.Duration(*l.lease.Spec.LeaseDurationSeconds) * time.Second)
		if time.Now().After(expiry) {
			l.expired = expiry
		}
	}
	d.lease = l
	return l, nil
}

// checkLeader checks that exactly one application-grid-controller leads.
func (d *doctor) checkLeader(ctx context.Context) error {
	subject := "deployment " + controllerNamespace + "/" + controllerName
	l, err := d.controllerLease(ctx)
	if err != nil {
		return err
	}
	deploy := l.deploy
	if deploy == nil {
		d.report.add(subject, "kubectl apply --server-side -k build/manifests/default (build/README.md, Install)", "missing: no grid is reconciled")
		return nil
	}
	if deploy.Status.ReadyReplicas == 0 {
		d.report.add(subject, fmt.Sprintf("kubectl -n %s describe deployment %s; its pods' logs", controllerNamespace, controllerName), "no ready replica: no grid is reconciled")
	}
	if !l.opts.LeaderElect {
		if deploy.Spec.Replicas != nil && *deploy.Spec.Replicas > 1 {
			d.report.add(subject, "set --leader-elect=true, or one replica", "%d replicas without leader election would all reconcile", *deploy.Spec.Replicas)
		}
		return nil
	}
	leaseSubject := "lease " + l.opts.LeaderElectionNamespace + "/" + l.opts.LeaderElectionName
	logsFix := fmt.Sprintf("kubectl -n %s logs -l %s=%s", controllerNamespace, nameLabel, controllerName)
	if l.holder == "" {
		d.report.add(leaseSubject, logsFix, "no controller leads: nothing reconciles grids")
		return nil
	}
	if !l.expired.IsZero() {
		d.report.add(leaseSubject, logsFix, "no controller leads: %s's lease ran out at %s", l.holder, l.expired.UTC().Format(time.RFC3339))
		return nil
	}
	// Identities are hostname_uuid; a pod's hostname is its name.
	podName, _, _ := strings.Cut(l.holder, "_")
	pods, err := d.kube.CoreV1().Pods(controllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: nameLabel + "=" + controllerName})
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == podName }) {
		d.report.add(leaseSubject, "find what holds it (another controller outside "+controllerNamespace+"?) and stop it", "held by %q, which is not a pod of %s", l.holder, subject)
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
// ServiceAccount to: its own, and with the optional components the site
// stream's and monitoring's (TestOurWrapperRoles reads them from
// build/manifests).
var ourWrapperRoles = []string{
	"servicegroup:application-grid-wrapper",
	"servicegroup:application-grid-wrapper-site",
	"servicegroup:metrics-serving-requester",
	"system:auth-delegator",
}

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
