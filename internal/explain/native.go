package explain

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/servicegroup/servicegroup/trafficmode"
)

// ModeNative is the ServiceReport mode of a Service with no topologyKeys
// annotation and trafficDistribution PreferSameZone (or its older name
// PreferClose): the data plane, not the wrapper, keeps traffic in the zone.
const ModeNative = "native"

// nativeDistribution says whether the Service asks the data plane for
// same-zone routing.
func nativeDistribution(svc *corev1.Service) bool {
	d := svc.Spec.TrafficDistribution
	return d != nil && (*d == corev1.ServiceTrafficDistributionPreferSameZone || *d == corev1.ServiceTrafficDistributionPreferClose)
}

// explainNative fills r for a native-mode Service with kube-proxy's rule
// for zone hints (pkg/proxy/topology.go): among ready endpoints, if every
// one carries zone hints and at least one hints the node's zone, only the
// endpoints hinting that zone are used; otherwise every endpoint is. The
// hints come from kube-controller-manager's EndpointSlice controller, which
// sets each endpoint's to its own node's zone.
func explainNative(r *ServiceReport, self map[string]string, ss []*discoveryv1.EndpointSlice) {
	r.Mode = ModeNative
	zone, hasZone := self[trafficmode.ZoneLabel]
	r.Zone = zone
	allHinted, zoneHasOne := true, false
	for _, s := range ss {
		for _, ep := range s.Endpoints {
			if !boolOr(ep.Conditions.Ready, true) {
				continue
			}
			hinted := ep.Hints != nil && len(ep.Hints.ForZones) > 0
			if !hinted {
				allHinted = false
				continue
			}
			if hasZone && slices.ContainsFunc(ep.Hints.ForZones, func(z discoveryv1.ForZone) bool { return z.Name == zone }) {
				zoneHasOne = true
			}
		}
	}
	switch {
	case !hasZone:
		r.Fallback = fmt.Sprintf("the node has no %s label: its data plane uses every endpoint", trafficmode.ZoneLabel)
	case !allHinted:
		r.Fallback = "a ready endpoint has no zone hint (kube-controller-manager has not hinted the slices, or an endpoint's node has no zone): every endpoint is used"
	case !zoneHasOne:
		r.Fallback = fmt.Sprintf("no ready endpoint in zone %q: every endpoint is used (prefer, not require)", zone)
	}
	all := endpointsOf(ss)
	if r.Fallback != "" {
		r.Served = all
		return
	}
	r.Served = []EndpointReport{}
	for _, s := range ss {
		for _, ep := range s.Endpoints {
			if ep.Hints != nil && slices.ContainsFunc(ep.Hints.ForZones, func(z discoveryv1.ForZone) bool { return z.Name == zone }) {
				r.Served = append(r.Served, endpointsOf([]*discoveryv1.EndpointSlice{{ObjectMeta: s.ObjectMeta, Endpoints: []discoveryv1.Endpoint{ep}}})...)
			}
		}
	}
	sortEndpoints(r.Served)
}
