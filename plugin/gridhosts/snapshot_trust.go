package gridhosts

import (
	"context"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
)

// When a snapshot may be answered from is package snapshottrust's rule,
// the wrapper's too: only while the apiserver cannot be reached, never
// when it refuses gridhosts (401, 403, certificate errors), never for
// another cluster, never when older than snapshottrust.DefaultMaxAge.

var snapshotsRefused = promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: plugin.Namespace,
	Subsystem: "gridhosts",
	Name:      "snapshots_refused_total",
	Help:      "Snapshots not answered from (or no longer), by reason: identity (the apiserver's Node has another UID, or none: another cluster), upstream-refuses (401, 403 or a certificate error: not an outage), too-old.",
}, []string{"reason"})

// identityNode is the Node whose UID identifies the snapshot's cluster:
// this block's node when the snapshot has it, else the first it has by
// name (clients mode without a default node). "" when it has none.
func (b *snapBody) identityNode(self string) (string, types.UID) {
	var first *snapNode
	for i := range b.Nodes {
		n := &b.Nodes[i]
		if n.Meta.Name == self {
			return n.Meta.Name, n.Meta.UID
		}
		if first == nil || n.Meta.Name < first.Meta.Name {
			first = n
		}
	}
	if first == nil {
		return "", ""
	}
	return first.Meta.Name, first.Meta.UID
}

// trustSnapshot decides, before a snapshot read at start-up is answered
// from, whether it may be: not too old, and the apiserver unreachable or
// answering with the snapshot's identity node under the same UID.
func (g *GridHosts) trustSnapshot(ctx context.Context, h snapHeader, b *snapBody) snapshottrust.Verdict {
	if v := snapshottrust.TooOld(h.Written, snapshottrust.DefaultMaxAge, time.Now()); !v.Serve {
		return v
	}
	name, uid := b.identityNode(g.Node)
	ctx, cancel := context.WithTimeout(ctx, snapshottrust.ProbeTimeout)
	defer cancel()
	if name == "" {
		// No node to compare: only the apiserver's refusal can rule it out.
		err := g.watcher.probe(ctx)
		if snapshottrust.UpstreamRefuses(err) {
			return snapshottrust.AtStart("", "", nil, err)
		}
		return snapshottrust.Verdict{Serve: true}
	}
	n, err := g.watcher.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	return snapshottrust.AtStart(name, uid, n, err)
}

// refuseSnapshot stops answering from the snapshot (or never starts): not
// ready until the informers are known, with why in one log line and the
// metric.
func (g *GridHosts) refuseSnapshot(logger klog.Logger, v snapshottrust.Verdict) {
	g.mode.Lock()
	defer g.mode.Unlock()
	if g.refused {
		return
	}
	g.refused = true
	snapshotsRefused.WithLabelValues(v.Reason).Inc()
	logger.Error(nil, "Not answering from the snapshot", "reason", v.Reason, "detail", v.Detail)
	if g.snap.Swap(nil) != nil {
		servingSnapshotWritten.Live()
		snapshotServing.Set(0)
	}
}

// onUpstreamError takes the snapshot off when an informer's list or watch
// is refused by the apiserver: not an outage.
func (g *GridHosts) onUpstreamError(ctx context.Context, err error) {
	if !snapshottrust.UpstreamRefuses(err) || g.snap.Load() == nil {
		return
	}
	v := snapshottrust.AtStart("", "", nil, err)
	g.refuseSnapshot(klog.FromContext(ctx), v)
}
