// Package autonomy is the one statement of when the cloud holds back its
// response to unreachable edge nodes, shared by the application-grid-
// controller's admission webhook (which withholds it) and kubectl grid
// (which shows it).
//
// The failure an edge site meets most is an uplink that drops while the cloud
// keeps running. Kubernetes then treats every node of the site as failed: the
// node lifecycle controller marks their pods not Ready (the EndpointSlice
// controller drops them from every Service) and taints the nodes
// node.kubernetes.io/unreachable:NoExecute, so their pods are evicted once
// their toleration (300 s by default) runs out and are all restarted when the
// link returns. A grid whose nodeunits should ride this out carries the
// annotation servicegroup.io/autonomy-duration. For a node of such a nodeunit
// the rule is:
//
//   - every node of the nodeunit unreachable (Ready Unknown): the nodeunit is
//     cut off from the cloud. The pods stay Ready and the NoExecute taint is
//     withheld until the autonomy duration, counted from the moment the last
//     node of the nodeunit went unreachable, has passed; then Kubernetes'
//     default handling applies.
//
//   - some node of the nodeunit reachable all along (since before the first
//     one turned unreachable): the unreachable nodes failed alone, and the
//     default handling applies, after a short decision window in which the
//     other nodes of a nodeunit that is really cut off also turn unreachable
//     (they stop renewing their Leases within one renewal interval of each
//     other, and the node lifecycle controller notices within its monitor
//     period). A node that turned reachable again since does not count: when
//     a cut-off nodeunit's link returns its nodes come back one by one, and
//     the last ones keep their pods until they are back too.
//
//   - a node Ready again: a write of the node lifecycle controller about it
//     comes from its view of before the kubelet came back (it reads Nodes
//     from its cache, and its pod updates are queued with a backoff); the
//     kubelet decides its pods' readiness again, so nothing flaps at the
//     reconnect.
//
// Only the cloud's own observations decide (the node lifecycle controller's
// Ready condition and the grids); nothing a node writes about itself or its
// peers does. A node can move itself between nodeunits only by its labels,
// which a node can set on its own Node unless the grid key is under
// node-restriction.kubernetes.io/; a node that joins a nodeunit while it is
// reachable makes that nodeunit not cut off, which only ever lets the default
// handling apply.
package autonomy
