// Package webhook withholds the node lifecycle controller's response to an
// edge nodeunit cut off from the cloud, as package autonomy states the rule.
// It is a validating admission webhook served by every replica of the
// application-grid-controller. The apiserver calls it only for the two
// writes the node lifecycle controller makes when a node turns unreachable
// (matchConditions in the ValidatingWebhookConfiguration it registers):
//
//   - a pod's status setting Ready from True to False (MarkPodsNotReady:
//     the EndpointSlice controller would drop the pod from every Service);
//   - a node's spec adding the node.kubernetes.io/unreachable:NoExecute
//     taint (the taint eviction controller would evict every pod that does
//     not tolerate it for longer than its tolerationSeconds).
//
// Denying one is how it withholds: the node lifecycle controller retries
// both (every node-monitor-period, and at its zone's eviction rate), so the
// default handling resumes at its next retry once the rule lets go. The
// webhook fails open (failurePolicy Ignore, a short timeout): if it is down
// or unreachable, Kubernetes' default behaviour applies. The leading
// replica registers it only while some grid carries
// servicegroup.io/autonomy-duration, and puts the registration back when
// someone else edits or deletes it (watch.go).
package webhook
