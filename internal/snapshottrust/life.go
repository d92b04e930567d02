package snapshottrust

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Identity is the Node that ties a snapshot to its cluster: the writer's own
// node, with the UID upstream served it under. A component without a node of
// its own (gridhosts answering per client) takes the snapshot's first node by
// name (IdentityOf). The zero Identity ties the snapshot to nothing: only
// upstream's refusal can rule it out.
type Identity struct {
	Node string
	UID  types.UID
}

// IdentityOf is the identity of a snapshot written by a component on node
// self ("" for none) that holds nodes (name and UID each): self under the UID
// the snapshot holds for it ("" when it holds none: upstream's Node then has
// another); without self, the first node by name.
func IdentityOf(self string, nodes func(yield func(string, types.UID) bool)) Identity {
	var first Identity
	for name, uid := range nodes {
		if self != "" && name == self {
			return Identity{name, uid}
		}
		if first.Node == "" || name < first.Node {
			first = Identity{name, uid}
		}
	}
	if self != "" {
		return Identity{Node: self}
	}
	return first
}

// Upstream is what the start-up check asks: the identity's Node, or without
// one whether upstream answers at all.
type Upstream struct {
	GetNode func(ctx context.Context, name string) (*corev1.Node, error)
	Probe   func(ctx context.Context) error
}

// Life is one component's snapshot from start-up until upstream confirms
// it, the wrapper's and gridhosts' alike: loaded, checked (Fresh: the maximum
// age; Check: identity and refusal, before anything is served), served
// (Serve) until upstream has synced (Confirm), or refused (Refuse) once,
// after which it is never served again. Refusals are counted by reason and
// the served snapshot's age is kept for snapshot_age_seconds.
type Life struct {
	// MaxAge: a snapshot written longer ago is not served; <= 0 serves any.
	MaxAge time.Duration
	// Refused is the component's snapshots_refused_total{reason}
	// (RefusedCounterOpts).
	Refused *prometheus.CounterVec
	// Age backs the component's snapshot_age_seconds (AgeGaugeOpts).
	Age *Age

	refused atomic.Bool
}

// Fresh refuses a snapshot written at written longer than MaxAge ago.
func (l *Life) Fresh(written, now time.Time) Verdict { return TooOld(written, l.MaxAge, now) }

// Check is the start-up check of this Life's snapshot (the package's Check).
func (l *Life) Check(ctx context.Context, id Identity, up Upstream) Verdict {
	return Check(ctx, id, up)
}

// Check asks upstream, before a snapshot of identity id is served, whether it
// may be: only when upstream cannot be reached, or answers with id's Node
// under id's UID. Without an identity only a refusal rules it out. At most
// ProbeTimeout.
func Check(ctx context.Context, id Identity, up Upstream) Verdict {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	if id.Node == "" {
		if err := up.Probe(ctx); UpstreamRefuses(err) {
			return AtStart("", "", nil, err)
		}
		return Verdict{Serve: true}
	}
	n, err := up.GetNode(ctx, id.Node)
	return AtStart(id.Node, id.UID, n, err)
}

// Serve records that answers come from a snapshot written at written; false
// (nothing recorded) once it was refused.
func (l *Life) Serve(written time.Time) bool {
	if l.refused.Load() {
		return false
	}
	l.Age.Serving(written)
	return true
}

// Confirm records that upstream's state has replaced the snapshot's.
func (l *Life) Confirm() { l.Age.Live() }

// Refuse refuses the snapshot for v (a verdict that does not serve): counted
// by reason, no longer served. True only the first time: the caller then
// logs it and stops serving; later refusals change nothing.
func (l *Life) Refuse(v Verdict) bool {
	if !l.refused.CompareAndSwap(false, true) {
		return false
	}
	l.Refused.WithLabelValues(v.Reason).Inc()
	l.Age.Live()
	return true
}

// IsRefused reports whether the snapshot was refused.
func (l *Life) IsRefused() bool { return l.refused.Load() }

// Refusal is the verdict for an error of upstream's lists or watches while
// a snapshot may be served: a refusal (401, 403, a certificate error) takes it
// off, any other error is the outage a snapshot is for (false).
func Refusal(err error) (Verdict, bool) {
	if !UpstreamRefuses(err) {
		return Verdict{}, false
	}
	return Verdict{Reason: RefusedUpstream, Detail: fmt.Sprintf("upstream refuses: %v", err)}, true
}
