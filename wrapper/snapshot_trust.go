package wrapper

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// A snapshot stands in for upstream only while upstream cannot be reached.
// An upstream that answers but refuses the wrapper (401, 403, a certificate
// it does not trust or that does not match) is a problem to fix, not an
// outage to ride out; and an upstream whose own Node has another UID is
// another cluster (reinstalled behind the same URL) or a re-registered node:
// the snapshot's state is not its state.

// DefaultSnapshotMaxAge: a snapshot written longer ago is not served. A
// week covers the outages edge sites ride out; an older state has likely
// lost Services, endpoints and nodes that a node should no longer route to.
const DefaultSnapshotMaxAge = 7 * 24 * time.Hour

// upstreamProbeTimeout bounds the start-up check of upstream.
const upstreamProbeTimeout = 5 * time.Second

// Reasons for snapshots_refused_total.
const (
	snapshotRefusedIdentity = "identity"
	snapshotRefusedUpstream = "upstream-refuses"
)

var snapshotsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: metricsNamespace, Name: "snapshots_refused_total",
	Help: "Snapshots not served (or no longer served) by reason: \"identity\" (upstream's Node has another UID: another cluster) or \"upstream-refuses\" (upstream answers with 401, 403 or a certificate error: not an outage).",
}, []string{"reason"})

func init() { Registry.MustRegister(snapshotsRefused) }

// upstreamRefuses: upstream was reached and refused the wrapper (not an
// outage): authentication, authorization or certificate errors.
func upstreamRefuses(err error) bool {
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

// snapshotNodeUID is the UID of this node as the snapshot's writer served it.
func (sn *snapshot) nodeUID(node string) types.UID {
	if o, ok := sn.objects[ResourceNodes][node]; ok {
		return o.GetUID()
	}
	return ""
}

// checkUpstreamAtStart asks upstream for this node before a seeded snapshot
// is served: served only when upstream cannot be reached, or answers with
// this node under the snapshot's UID.
func (s *Server) checkUpstreamAtStart(ctx context.Context, logger klog.Logger) {
	snap := s.seededFrom.Load()
	if snap == nil {
		return
	}
	probeCtx, cancel := context.WithTimeout(ctx, upstreamProbeTimeout)
	defer cancel()
	n, err := s.client.CoreV1().Nodes().Get(probeCtx, s.opts.NodeName, metav1.GetOptions{})
	switch {
	case upstreamRefuses(err):
		s.refuseSnapshot(logger, snapshotRefusedUpstream, fmt.Sprintf("upstream refuses the wrapper: %v", err))
	case apierrors.IsNotFound(err):
		s.refuseSnapshot(logger, snapshotRefusedIdentity, fmt.Sprintf("upstream has no Node %s: another cluster, or the node was removed", s.opts.NodeName))
	case err == nil:
		s.checkIdentity(logger, n)
	default:
		logger.Info("Upstream unreachable at start-up", "err", err)
	}
}

// checkIdentity refuses the snapshot when upstream's Node has another UID
// than the snapshot's.
func (s *Server) checkIdentity(logger klog.Logger, n *corev1.Node) {
	snap := s.seededFrom.Load()
	if snap == nil || n.Name != s.opts.NodeName {
		return
	}
	if want := snap.nodeUID(s.opts.NodeName); n.UID != want {
		s.refuseSnapshot(logger, snapshotRefusedIdentity,
			fmt.Sprintf("upstream's Node %s has UID %s, the snapshot's %s: another cluster (or a re-registered node)", n.Name, n.UID, want))
	}
}

// refuseSnapshot stops serving the snapshot: not ready (429 to clients)
// until upstream has synced, with why on /readyz. Upstream's state replaces
// the snapshot's when it syncs, as after any start-up.
func (s *Server) refuseSnapshot(logger klog.Logger, reason, why string) {
	if !s.snapshotRefused.CompareAndSwap(false, true) {
		return
	}
	snapshotsRefused.WithLabelValues(reason).Inc()
	logger.Error(nil, "Not serving the snapshot", "reason", reason, "detail", why)
	s.waiting.Store("not serving the snapshot: " + why)
	if s.seededFrom.Load() != nil {
		s.ready.Store(false)
		servingSnapshotSince.Store(0)
	}
}

// watchUpstreamErrors: an informer whose list or watch upstream refuses
// takes the snapshot off (while one is served) and shows on /readyz; network
// errors are the outage a snapshot is for. Logged as client-go does.
func (s *Server) watchUpstreamErrors(inf cache.SharedIndexInformer) error {
	return inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if !upstreamRefuses(err) {
			return
		}
		s.upstreamRefusal.Store(err.Error())
		if s.seededFrom.Load() != nil {
			s.refuseSnapshot(klog.FromContext(ctx), snapshotRefusedUpstream, fmt.Sprintf("upstream refuses the wrapper: %v", err))
		}
	})
}

// selfNodeIdentityHandler checks the snapshot's identity when upstream
// first answers with this node.
func (s *Server) selfNodeIdentityHandler(logger klog.Logger) cache.ResourceEventHandler {
	check := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			s.checkIdentity(logger, n)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, obj any) { check(obj) }}
}
