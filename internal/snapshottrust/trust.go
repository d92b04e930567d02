// Package snapshottrust is the one rule for when a node-local snapshot (the
// wrapper's, gridhosts') may stand in for the apiserver: only while the
// apiserver cannot be reached. An apiserver that answers but refuses the
// component (401, 403, a certificate it does not trust or that does not
// match) is a problem to fix, not an outage to ride out; an apiserver whose
// Node of the snapshot has another UID, or none, is another cluster
// (reinstalled behind the same address) or a re-registered node: the
// snapshot's state is not its state; and a snapshot older than the maximum
// age has likely lost Services, endpoints and nodes a node should no longer
// route to.
package snapshottrust

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultMaxAge: a snapshot written longer ago is not served. A week covers
// the outages edge sites ride out.
const DefaultMaxAge = 7 * 24 * time.Hour

// ProbeTimeout bounds the start-up check of the apiserver.
const ProbeTimeout = 5 * time.Second

// Reasons a snapshot is refused, the label of each component's
// snapshots_refused_total.
const (
	// RefusedIdentity: the apiserver's Node has another UID, or none.
	RefusedIdentity = "identity"
	// RefusedUpstream: the apiserver answers with 401, 403 or a
	// certificate error.
	RefusedUpstream = "upstream-refuses"
	// RefusedTooOld: written longer ago than the maximum age.
	RefusedTooOld = "too-old"
)

// UpstreamRefuses reports whether err means the apiserver was reached and
// refused the caller (not an outage): authentication, authorization or
// certificate errors.
func UpstreamRefuses(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return true
	}
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var alert tls.AlertError
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &alert)
}

// Verdict is whether a snapshot may be served, and if not, why.
type Verdict struct {
	Serve  bool
	Reason string // one of the Refused* constants when !Serve
	Detail string
}

// TooOld refuses a snapshot written at written when maxAge (> 0) has
// passed since; maxAge <= 0 means no limit.
func TooOld(written time.Time, maxAge time.Duration, now time.Time) Verdict {
	if age := now.Sub(written); maxAge > 0 && age > maxAge {
		return Verdict{Reason: RefusedTooOld, Detail: fmt.Sprintf("written %s ago, more than the maximum age %s", age.Round(time.Second), maxAge)}
	}
	return Verdict{Serve: true}
}

// AtStart decides from the apiserver's answer to a Get of Node node (n, err)
// whether the snapshot, which holds that Node with UID want, may be served:
// when the apiserver cannot be reached, or answers with that Node under
// the same UID.
func AtStart(node string, want types.UID, n *corev1.Node, err error) Verdict {
	switch {
	case UpstreamRefuses(err):
		return Verdict{Reason: RefusedUpstream, Detail: fmt.Sprintf("upstream refuses: %v", err)}
	case apierrors.IsNotFound(err):
		return Verdict{Reason: RefusedIdentity, Detail: fmt.Sprintf("upstream has no Node %s: another cluster, or the node was removed", node)}
	case err != nil:
		return Verdict{Serve: true, Detail: fmt.Sprintf("upstream unreachable: %v", err)}
	}
	return SameNode(n, want)
}

// SameNode refuses the snapshot when the apiserver's Node n has another UID
// than the snapshot's want.
func SameNode(n *corev1.Node, want types.UID) Verdict {
	if n.UID != want {
		return Verdict{Reason: RefusedIdentity,
			Detail: fmt.Sprintf("upstream's Node %s has UID %s, the snapshot's %s: another cluster (or a re-registered node)", n.Name, n.UID, want)}
	}
	return Verdict{Serve: true}
}
