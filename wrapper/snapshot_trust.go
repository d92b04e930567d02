package wrapper

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/wrapper/snapshot"
)

// When a snapshot may stand in for upstream is package snapshottrust's
// rule, shared with gridhosts.

// DefaultSnapshotMaxAge: a snapshot written longer ago is not served.
const DefaultSnapshotMaxAge = snapshottrust.DefaultMaxAge

var snapshotsRefused = metric.NewCounterVec(snapshottrust.RefusedCounterOpts(metricsNamespace, ""), []string{"reason"})

// snapshotNodeUID is the UID of this node as the snapshot's writer served it.
func snapshotNodeUID(sn *snapshot.Snapshot, node string) types.UID {
	if o, ok := sn.Objects[ResourceNodes][node]; ok {
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
	id := snapshottrust.Identity{Node: s.opts.NodeName, UID: snapshotNodeUID(snap, s.opts.NodeName)}
	switch v := snapshottrust.Check(ctx, id, snapshottrust.Upstream{
		GetNode: func(ctx context.Context, name string) (*corev1.Node, error) {
			return s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		},
	}); {
	case !v.Serve:
		s.refuseSnapshot(logger, v.Reason, v.Detail)
	case v.Detail != "":
		logger.Info("Upstream unreachable at start-up", "detail", v.Detail)
	}
}

// checkIdentity refuses the snapshot when upstream's Node has another UID
// than the snapshot's.
func (s *Server) checkIdentity(logger klog.Logger, n *corev1.Node) {
	snap := s.seededFrom.Load()
	if snap == nil || n.Name != s.opts.NodeName {
		return
	}
	if v := snapshottrust.SameNode(n, snapshotNodeUID(snap, s.opts.NodeName)); !v.Serve {
		s.refuseSnapshot(logger, v.Reason, v.Detail)
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
		servingSnapshotSince.Live()
	}
}

// watchUpstreamErrors: an informer whose list or watch upstream refuses
// takes the snapshot off (while one is served) and shows on /readyz; network
// errors are the outage a snapshot is for. Logged as client-go does.
func (s *Server) watchUpstreamErrors(inf cache.SharedIndexInformer) error {
	return inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		s.noteUpstreamError(ctx, err)
	})
}

// noteUpstreamError acts on a refusal among upstream's list and watch
// errors (see watchUpstreamErrors).
func (s *Server) noteUpstreamError(ctx context.Context, err error) {
	if !snapshottrust.UpstreamRefuses(err) {
		return
	}
	s.upstreamRefusal.Store(err.Error())
	if s.seededFrom.Load() != nil {
		s.refuseSnapshot(klog.FromContext(ctx), snapshottrust.RefusedUpstream, fmt.Sprintf("upstream refuses the wrapper: %v", err))
	}
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
