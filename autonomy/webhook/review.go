package webhook

import (
	"encoding/json"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// action is what the node lifecycle controller asks for.
type action string

const (
	// markNotReady: a pod's Ready condition from True to False.
	markNotReady action = "not-ready"
	// taintNoExecute: the unreachable NoExecute taint on a node.
	taintNoExecute action = "taint"
)

// Paths of the two webhooks.
const (
	podsPath  = "/autonomy/pods"
	nodesPath = "/autonomy/nodes"
)

// UnreachableTaint is the taint the node lifecycle controller puts on a node
// whose kubelet stopped renewing its Lease.
const UnreachableTaint = "node.kubernetes.io/unreachable"

// request is one call, read.
type request struct {
	review *admissionv1.AdmissionReview
	action action
	// node is the node the action is about; nodeObj its object when the
	// request carries it (a taint), with its status.
	node    string
	nodeObj *corev1.Node
	// pod names the pod of a markNotReady.
	pod    metav1.ObjectMeta
	dryRun bool
}

// readReview decodes an AdmissionReview and says what it asks, checking it
// is one of the two writes the webhook is registered for (the
// matchConditions make the apiserver send only those; anything else is let
// through).
func readReview(body []byte) (*request, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	req := review.Request
	if req == nil {
		return nil, errors.New("AdmissionReview without a request")
	}
	r := &request{review: &review, dryRun: req.DryRun != nil && *req.DryRun}
	switch {
	case req.Resource.Group == "" && req.Resource.Resource == "pods" && req.SubResource == "status" && req.Operation == admissionv1.Update:
		var pod, old corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
			return nil, fmt.Errorf("decoding the pod: %w", err)
		}
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return nil, fmt.Errorf("decoding the old pod: %w", err)
		}
		if readyStatus(&old) == corev1.ConditionTrue && readyStatus(&pod) == corev1.ConditionFalse && pod.Spec.NodeName != "" {
			r.action, r.node, r.pod = markNotReady, pod.Spec.NodeName, pod.ObjectMeta
		}
	case req.Resource.Group == "" && req.Resource.Resource == "nodes" && req.SubResource == "" && req.Operation == admissionv1.Update:
		var node, old corev1.Node
		if err := json.Unmarshal(req.Object.Raw, &node); err != nil {
			return nil, fmt.Errorf("decoding the node: %w", err)
		}
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return nil, fmt.Errorf("decoding the old node: %w", err)
		}
		if node.Name != "" && hasUnreachableNoExecute(&node) && !hasUnreachableNoExecute(&old) {
			r.action, r.node, r.nodeObj = taintNoExecute, node.Name, &node
		}
	}
	return r, nil
}

func readyStatus(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

func hasUnreachableNoExecute(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == UnreachableTaint && t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// respond fills the review's response: allowed, or denied with message.
func (r *request) respond(allowed bool, message string) []byte {
	resp := &admissionv1.AdmissionResponse{UID: r.review.Request.UID, Allowed: allowed}
	if !allowed {
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: message}
	}
	out := admissionv1.AdmissionReview{TypeMeta: r.review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	}
	data, _ := json.Marshal(out)
	return data
}
