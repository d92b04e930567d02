package metricscert

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// SignerName is the signer the wrappers ask and this package serves.
const SignerName = "servicegroup.io/metrics-serving"

// NodeNameExtra is the user extra the apiserver sets from a pod-bound
// ServiceAccount token: the node of the pod the token is bound to.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// Reasons of a denial, in the Denied condition.
const (
	ReasonNotAllowedRequester = "RequesterNotAllowed"
	ReasonNoNodeBinding       = "NoNodeBinding"
	ReasonBadRequest          = "BadRequest"
	ReasonNotRequestersNode   = "NotTheRequestersNode"
	ReasonBadUsages           = "BadUsages"
	ReasonNodeNotFound        = "NodeNotFound"
)

// allowedUsages are what a serving certificate may be for.
var allowedUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth,
}

// denial is why a request is refused.
type denial struct{ reason, message string }

func (d *denial) Error() string { return d.reason + ": " + d.message }

// requesterNode checks who asks: one of requesters, with a token bound to
// a pod on a node. It returns that node.
func requesterNode(csr *certificatesv1.CertificateSigningRequest, requesters []string) (string, *denial) {
	if !slices.Contains(requesters, csr.Spec.Username) {
		return "", &denial{ReasonNotAllowedRequester, fmt.Sprintf("%q may not ask %s for a certificate (allowed: %s)",
			csr.Spec.Username, SignerName, strings.Join(requesters, ", "))}
	}
	nodes := csr.Spec.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return "", &denial{ReasonNoNodeBinding, fmt.Sprintf("the request's token names no node (user extra %s: %q): ask with the token of a pod on the node", NodeNameExtra, []string(nodes))}
	}
	return nodes[0], nil
}

// parseRequest reads and checks the x509 request a CSR carries.
func parseRequest(csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, *denial) {
	block, rest := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" || len(strings.TrimSpace(string(rest))) != 0 {
		return nil, &denial{ReasonBadRequest, "spec.request is not one PEM CERTIFICATE REQUEST"}
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, &denial{ReasonBadRequest, err.Error()}
	}
	if err := req.CheckSignature(); err != nil {
		return nil, &denial{ReasonBadRequest, "the request's signature: " + err.Error()}
	}
	return req, nil
}

// checkUsages: server auth, with nothing a serving certificate does not need.
func checkUsages(csr *certificatesv1.CertificateSigningRequest) *denial {
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		return &denial{ReasonBadUsages, `usages lack "server auth"`}
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(allowedUsages, u) {
			return &denial{ReasonBadUsages, fmt.Sprintf("usage %q is not for a serving certificate (allowed: %q)", u, allowedUsages)}
		}
	}
	return nil
}

// checkNames: every name the request asks for is node's own (its name, an
// address in its status), and it asks for at least one.
func checkNames(req *x509.CertificateRequest, node *corev1.Node) *denial {
	if len(req.URIs) > 0 || len(req.EmailAddresses) > 0 {
		return &denial{ReasonBadRequest, "a serving certificate names no URIs or email addresses"}
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return &denial{ReasonBadRequest, "the request names neither the node nor one of its addresses"}
	}
	for _, name := range req.DNSNames {
		if name != node.Name {
			return &denial{ReasonNotRequestersNode, fmt.Sprintf("DNS name %q is not the requester's node %q", name, node.Name)}
		}
	}
	for _, ip := range req.IPAddresses {
		if !nodeHasAddress(node, ip) {
			return &denial{ReasonNotRequestersNode, fmt.Sprintf("IP address %s is not one of node %q's (%s)", ip, node.Name, nodeAddresses(node))}
		}
	}
	return nil
}

func nodeHasAddress(node *corev1.Node, ip net.IP) bool {
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if got := net.ParseIP(a.Address); got != nil && got.Equal(ip) {
			return true
		}
	}
	return false
}

func nodeAddresses(node *corev1.Node) string {
	var out []string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out = append(out, a.Address)
		}
	}
	if len(out) == 0 {
		return "none in its status"
	}
	return strings.Join(out, ", ")
}
