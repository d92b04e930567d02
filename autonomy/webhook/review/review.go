// Package review reads the AdmissionReviews the autonomy webhook is sent and
// writes its answers. It knows nothing of grids or nodeunits (package
// webhook decides), and is apart from the webhook so that fuzzing the
// decoding compiles only the API types, not client-go and the server.
package review

import (
	"encoding/json"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Action is what the node lifecycle controller asks for: the webhook's
// decision and its reviews metric are per action.
type Action string

const (
	// MarkNotReady: a pod's Ready condition from True to False.
	MarkNotReady Action = "not-ready"
	// TaintNoExecute: the unreachable NoExecute taint on a node.
	TaintNoExecute Action = "taint"
)

// UnreachableTaint is the taint the node lifecycle controller puts on a node
// whose kubelet stopped renewing its Lease; the webhook's matchConditions
// name it too.
const UnreachableTaint = "node.kubernetes.io/unreachable"

// Request is one call, read: what the webhook needs to decide, and the
// review it answers.
type Request struct {
	review *admissionv1.AdmissionReview
	// Action is empty for anything but the two writes the webhook may
	// withhold; the webhook lets an empty one through.
	Action Action
	// Node is the node the action is about; NodeObj its object when the
	// request carries it (a taint), with its status.
	Node    string
	NodeObj *corev1.Node
	// Pod names the pod of a MarkNotReady.
	Pod    metav1.ObjectMeta
	DryRun bool
}

// Read decodes an AdmissionReview and says what it asks, checking it is one
// of the two writes the webhook is registered for (the matchConditions make
// the apiserver send only those; anything else is let through). An error
// means the body is no AdmissionReview the webhook can answer.
func Read(body []byte) (*Request, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	req := review.Request
	if req == nil {
		return nil, errors.New("AdmissionReview without a request")
	}
	r := &Request{review: &review, DryRun: req.DryRun != nil && *req.DryRun}
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
			r.Action, r.Node, r.Pod = MarkNotReady, pod.Spec.NodeName, pod.ObjectMeta
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
			r.Action, r.Node, r.NodeObj = TaintNoExecute, node.Name, &node
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

// Respond is the AdmissionReview answering r: allowed, or denied with
// message, which the apiserver hands the node lifecycle controller.
func (r *Request) Respond(allowed bool, message string) []byte {
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
