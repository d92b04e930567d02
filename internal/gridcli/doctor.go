package gridcli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/rest"
)

// Where the shipped manifests put our components (build/manifests).
const (
	edgeNamespace       = "edge-system"
	controllerNamespace = "servicegroup-system"
	wrapperName         = "application-grid-wrapper"
	// Not SuperEdge's edge-system/application-grid-wrapper: its wide
	// ClusterRoleBinding must never reach our wrapper.
	wrapperServiceAccount = "servicegroup-wrapper"
	corednsName           = "coredns-gridhosts"
	controllerName        = "application-grid-controller"
	kubeProxyEdgeName     = "kube-proxy-edge"
	nameLabel             = "app.kubernetes.io/name"
	// kubeadm's label on the stock kube-proxy's pods.
	stockKubeProxyLabel = "k8s-app=kube-proxy"
)

// finding is one problem and what fixes it.
type finding struct {
	Subject string `json:"subject"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// doctorReport is everything `kubectl grid doctor` found.
type doctorReport struct {
	EdgeNodes []string `json:"edgeNodes"`
	// ControllerVersion is the leading controller's release, as published
	// on its Lease ("" if none publishes it).
	ControllerVersion string    `json:"controllerVersion,omitempty"`
	Problems          []finding `json:"problems"`
}

func (r *doctorReport) add(subject, fix, format string, args ...any) {
	r.Problems = append(r.Problems, finding{Subject: subject, Problem: fmt.Sprintf(format, args...), Fix: fix})
}

// problemsFound is doctor's error: the lines are already printed.
type problemsFound int

func (n problemsFound) Error() string { return fmt.Sprintf("%d problem(s) found", int(n)) }

func newDoctorCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check an installation from the cloud: one line per problem and its fix, non-zero exit if any",
		Long: `Checks, with the apiserver's view only (kubectl exec for the wrappers' state):
  per edge node (the nodes the wrapper DaemonSet selects): a ready wrapper not
  serving its snapshot, a ready kube-proxy-edge and no stock kube-proxy, a ready
  per-node CoreDNS;
  the superedge.io CRDs equal to the schemas the leading controller was
  built with (published on its Lease), or to this release's when no
  leader publishes them;
  exactly one application-grid-controller leading;
  SuperEdge leftovers: its controller, wrapper and DNS DaemonSets, its
  wrapper's ServiceAccount and wide ClusterRoleBinding;
  any ClusterRoleBinding giving our wrapper's ServiceAccount more than ours;
  autonomy (servicegroup.io/autonomy-duration): invalid annotations, the
  webhook registered and reachable, the controller off the nodeunits it
  protects, and every nodeunit with unreachable nodes (cut off since when,
  autonomous until when, or failed nodes);
  traffic modes (servicegroup.io/traffic-mode): invalid values, native-mode
  ServiceGrids on a key that is not the zone source (the controller's
  --zone-from-grid-key, else topology.kubernetes.io/zone), and nodes whose
  topology.kubernetes.io/zone disagrees with their nodeunit of that key.`,
		Example: "  kubectl grid doctor\n  kubectl grid doctor -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := o.doctor(cmd.Context())
			if err != nil {
				return err
			}
			if err := o.print(r, func(t *table) { printDoctorReport(t, r) }); err != nil {
				return err
			}
			if len(r.Problems) > 0 {
				return problemsFound(len(r.Problems))
			}
			return nil
		},
	}
}

func (o *options) doctor(ctx context.Context) (*doctorReport, error) {
	c, err := o.clients()
	if err != nil {
		return nil, err
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r := &doctorReport{EdgeNodes: []string{}, Problems: []finding{}}
	d := &doctor{kube: c.kube, c: c, ext: ext, exec: podExecutor{cfg: rest.CopyConfig(cfg), kube: c.kube}, report: r}
	for _, check := range []func(context.Context) error{d.checkEdgeNodes, d.checkCRDs, d.checkLeader, d.checkSuperEdgeLeftovers, d.checkAutonomy, d.checkTrafficModes} {
		if err := check(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func printDoctorReport(t *table, r *doctorReport) {
	for _, p := range r.Problems {
		t.line("%s: %s. Fix: %s", p.Subject, p.Problem, p.Fix)
	}
	if len(r.Problems) == 0 {
		t.line("No problems found (%d edge nodes checked).", len(r.EdgeNodes))
	}
}
