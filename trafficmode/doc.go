// Package trafficmode says how a ServiceGrid's Service keeps traffic in its
// nodeunit, one rule for the controller (which renders the Service and
// writes the zone labels) and kubectl grid (which explains and checks it):
//
//   - wrapper (the default, SuperEdge's): the Service carries the
//     topologyKeys annotation and each node's wrapper serves kube-proxy only
//     the endpoints of the node's nodeunit. Strict, any grid key, kube-proxy
//     behind the wrapper only.
//   - native: the Service carries trafficDistribution: PreferSameZone and
//     the data plane (kube-proxy, Cilium, ztunnel...) prefers endpoints of
//     the caller's zone, topology.kubernetes.io/zone, which the controller
//     keeps equal to the nodeunit value of one grid key for the whole
//     cluster (--zone-from-grid-key). Prefer semantics only.
//
// mode.go parses the ServiceGrid's annotation, zone.go says which grid key
// native mode accepts and what the zone-label writer does to one node.
package trafficmode
