package gridhosts

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

// When a snapshot may be answered from is package snapshottrust's Life, the
// wrapper's rule too: not older than snapshot_max_age, and only while the
// apiserver cannot be reached, never when it refuses gridhosts (401, 403,
// certificate errors), never for another cluster.

// trustSnapshot decides, before a snapshot read at start-up is answered
// from, whether it may be: not too old, and the apiserver unreachable or
// answering with the snapshot's identity.
func (g *GridHosts) trustSnapshot(ctx context.Context, h snapshot.Header, b *snapshot.Body) snapshottrust.Verdict {
	life := g.snapshot.Life
	if v := life.Fresh(h.Written, time.Now()); !v.Serve {
		return v
	}
	return life.Check(ctx, b.Identity(h, g.Node), snapshottrust.Upstream{
		GetNode: func(ctx context.Context, name string) (*corev1.Node, error) {
			return g.watcher.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		},
		Probe: g.watcher.Probe,
	})
}

// identify asks the apiserver for this block's Node, whose UID the
// snapshot's header records: in node mode its labels may come from
// NodeLabelSummaries, which carry no UID. A Node the apiserver does not have
// is recorded without one (a snapshot of it is then refused while the
// apiserver answers).
func (g *GridHosts) identify(ctx context.Context) (snapshottrust.Identity, error) {
	n, err := g.watcher.Client().CoreV1().Nodes().Get(ctx, g.Node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return snapshottrust.Identity{Node: g.Node}, nil
	case err != nil:
		return snapshottrust.Identity{}, err
	}
	return snapshottrust.Identity{Node: n.Name, UID: n.UID}, nil
}

// refuseSnapshot stops answering from the snapshot (or never starts): not
// ready until the informers are known, with why in one log line and the
// metric.
func (g *GridHosts) refuseSnapshot(logger klog.Logger, v snapshottrust.Verdict) {
	g.mode.Lock()
	defer g.mode.Unlock()
	if !g.snapshot.Life.Refuse(v) {
		return
	}
	logger.Error(nil, "Not answering from the snapshot", "reason", v.Reason, "detail", v.Detail)
	if g.snap.Swap(nil) != nil {
		snapshot.Serving.Set(0)
	}
}

// onUpstreamError takes the snapshot off when an informer's list or watch
// is refused by the apiserver: not an outage.
func (g *GridHosts) onUpstreamError(ctx context.Context, err error) {
	if g.snap.Load() == nil {
		return
	}
	if v, refused := snapshottrust.Refusal(err); refused {
		g.refuseSnapshot(klog.FromContext(ctx), v)
	}
}
