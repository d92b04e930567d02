package gridcli

import (
	"context"
	"fmt"
	"sort"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/internal/explain"
)

// autonomyConfiguration is the shipped name of the webhook's registration.
const autonomyConfiguration = autonomy.WebhookConfigurationName

// checkAutonomy reports invalid autonomy annotations, a webhook the
// apiserver cannot use while grids opt in, a controller running inside a
// nodeunit it protects, and every nodeunit with unreachable nodes.
func (d *doctor) checkAutonomy(ctx context.Context) error {
	var all []*unstructured.Unstructured
	for _, resource := range []string{"deploymentgrids", "statefulsetgrids"} {
		gvr := schema.GroupVersionResource{Group: superedgev1.GroupName, Version: "v1", Resource: resource}
		l, err := d.c.dynamic.Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s: %w", resource, err)
		}
		for i := range l.Items {
			all = append(all, &l.Items[i])
		}
	}
	opted, bad := explain.AutonomyGrids(all)
	for _, grid := range sortedErrKeys(bad) {
		d.report.add(grid, fmt.Sprintf("set %s to a duration between %s and %s, or remove it", autonomy.DurationAnnotation, autonomy.MinDuration, autonomy.MaxDuration),
			"%v: its nodeunits get no autonomy", bad[grid])
	}
	if len(opted) == 0 {
		return nil
	}
	if err := d.checkAutonomyWebhook(ctx); err != nil {
		return err
	}
	nodes, err := d.c.nodes(ctx)
	if err != nil {
		return err
	}
	anodes := explain.AutonomyNodes(nodes)
	byName := map[string]autonomy.Node{}
	for _, n := range anodes {
		byName[n.Name] = n
	}
	controllers, err := d.kube.CoreV1().Pods(controllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: nameLabel + "=" + controllerName})
	if err != nil {
		return err
	}
	for _, p := range controllers.Items {
		n, ok := byName[p.Spec.NodeName]
		if !ok {
			continue
		}
		for _, g := range opted {
			if v := n.Labels[g.Key]; v != "" {
				d.report.add("pod "+controllerNamespace+"/"+p.Name, "keep the controller on cloud nodes (a nodeSelector or node affinity in its Deployment)",
					"runs on %s, in nodeunit %s=%s that %s %s/%s makes autonomous: cut off together, the apiserver cannot reach its webhook and the nodeunit gets the default eviction",
					n.Name, g.Key, v, g.Kind, g.Namespace, g.Name)
				break
			}
		}
	}
	now := time.Now()
	for _, u := range autonomy.Units(anodes, opted, now, explain.DefaultDecisionWindow) {
		subject := "nodeunit " + u.Key + "=" + u.Value
		switch u.State {
		case autonomy.CutOff:
			d.report.add(subject, "restore the site's link to the cloud before then; or raise "+autonomy.DurationAnnotation+" on "+u.Grid.Kind+" "+u.Grid.Namespace+"/"+u.Grid.Name,
				"%s", explain.Connection(u, now))
		case autonomy.Expired:
			d.report.add(subject, "restore the site's link to the cloud: its pods are evicted and their replacements wait for its nodes",
				"%s", explain.Connection(u, now))
		default:
			d.report.add(subject, "repair the unreachable nodes, or delete those gone for good",
				"%s", explain.Connection(u, now))
		}
	}
	return nil
}

// checkAutonomyWebhook: registered, both webhooks failing open, with a CA,
// and (for a Service) a ready endpoint behind it.
func (d *doctor) checkAutonomyWebhook(ctx context.Context) error {
	subject := "ValidatingWebhookConfiguration " + autonomyConfiguration
	// The leader puts back within seconds a registration someone edited
	// or deleted: one seen wrong means no leader runs the webhook.
	fix := "the leading application-grid-controller, run with --autonomy-webhook-bind-address=:9443 (build/manifests/controller does), registers it and puts it back within seconds of an edit or deletion: check that one leads and read its log"
	cfg, err := orNil(d.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, autonomyConfiguration, metav1.GetOptions{}))
	if err != nil {
		return err
	}
	if cfg == nil {
		d.report.add(subject, fix, "missing while grids carry %s: nodeunits cut off from the cloud get the default eviction", autonomy.DurationAnnotation)
		return nil
	}
	found := map[string]bool{}
	for _, w := range cfg.Webhooks {
		found[w.Name] = true
		if len(w.ClientConfig.CABundle) == 0 {
			d.report.add(subject, fix, "webhook %s has no caBundle: the apiserver cannot call it", w.Name)
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
			d.report.add(subject, fix,
				"webhook %s does not fail open: while it is down the node lifecycle controller's writes are refused", w.Name)
		}
		if s := w.ClientConfig.Service; s != nil && !found["service:"+s.Namespace+"/"+s.Name] {
			found["service:"+s.Namespace+"/"+s.Name] = true
			slices, err := d.kube.DiscoveryV1().EndpointSlices(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + s.Name})
			if err != nil {
				return err
			}
			if !anyReadyEndpoint(slices.Items) {
				d.report.add("service "+s.Namespace+"/"+s.Name, "check the controller's pods and the Service's selector and ports",
					"no ready endpoint: the apiserver cannot reach the autonomy webhook, and nodeunits cut off from the cloud get the default eviction")
			}
		}
	}
	for _, name := range []string{autonomy.PodsWebhookName, autonomy.NodesWebhookName} {
		if !found[name] {
			d.report.add(subject, fix, "webhook %s missing", name)
		}
	}
	return nil
}

func anyReadyEndpoint(slices []discoveryv1.EndpointSlice) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return true
			}
		}
	}
	return false
}

func sortedErrKeys(m map[string]error) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
