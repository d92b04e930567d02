package wrapper_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a kubelet writes about its node, and how often (kubelet v1.37's
// defaults): its Lease in kube-node-lease, 40 s long, renewed every quarter
// of it; its Node's status every nodeStatusReportFrequency when nothing
// changed, as a strategic merge patch of the conditions' heartbeat times.
const (
	kubeletLeaseNamespace = corev1.NamespaceNodeLease
	kubeletLeaseSeconds   = 40
	kubeletLeaseRenew     = kubeletLeaseSeconds * time.Second / 4
	kubeletStatusReport   = 5 * time.Minute
)

var kubeletConditions = []string{"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}

// kubeletHeartbeat is the patch a kubelet sends when only the heartbeat
// times moved: what its two-way strategic merge patch of the old and new
// status holds then.
func kubeletHeartbeat(beat time.Time) []byte {
	ts := beat.UTC().Format(time.RFC3339)
	var order, conds []string
	for _, c := range kubeletConditions {
		order = append(order, fmt.Sprintf(`{"type":%q}`, c))
		conds = append(conds, fmt.Sprintf(`{"lastHeartbeatTime":%q,"type":%q}`, ts, c))
	}
	return fmt.Appendf(nil, `{"status":{"$setElementOrder/conditions":[%s],"conditions":[%s]}}`,
		strings.Join(order, ","), strings.Join(conds, ","))
}

// fleetKubelets writes, for every Node of a fleet, what its kubelet would.
type fleetKubelets struct {
	f      *fleet
	mu     []sync.Mutex // one per node: a renewal in the background and one of a round never race
	leases []*coordinationv1.Lease
	// statusHeld, while set, names the nodes whose status reports the
	// background leaves out (holdStatus).
	statusHeld atomic.Pointer[func(i int) bool]
	// renewed, reported and failed count the background's writes, held
	// the status reports it left out.
	renewed, reported, held, failed atomic.Int64
}

// startKubelets creates every node's Lease, as its kubelet does when it
// registers, and writes, until the benchmark ends, each Lease every
// kubeletLeaseRenew and each status every kubeletStatusReport, the nodes
// spread evenly over each period as kubelets started at different times are.
func startKubelets(b *testing.B, f *fleet) *fleetKubelets {
	k := &fleetKubelets{f: f, mu: make([]sync.Mutex, f.nodesN), leases: make([]*coordinationv1.Lease, f.nodesN)}
	fleetParallel(f.nodesN, func(i int) {
		node, err := f.admin.CoreV1().Nodes().Get(b.Context(), fleetNodeName(i), metav1.GetOptions{})
		if err != nil {
			b.Error(err)
			return
		}
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: kubeletLeaseNamespace, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(node.Name), LeaseDurationSeconds: ptr[int32](kubeletLeaseSeconds),
				RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}
		if k.leases[i], err = f.admin.CoordinationV1().Leases(kubeletLeaseNamespace).Create(b.Context(), l, metav1.CreateOptions{}); err != nil {
			b.Error(err)
		}
	})
	if b.Failed() {
		b.FailNow()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	every := func(period time.Duration, write func(ctx context.Context, i int) error, done *atomic.Int64, skip func(i int) bool) {
		wg.Go(func() {
			t := time.NewTicker(period / time.Duration(f.nodesN))
			defer t.Stop()
			sem := make(chan struct{}, 8)
			for i := 0; ; i = (i + 1) % f.nodesN {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if skip != nil && skip(i) {
					k.held.Add(1)
					continue
				}
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					if err := write(ctx, i); err != nil && ctx.Err() == nil {
						k.failed.Add(1)
						return
					}
					done.Add(1)
				})
			}
		})
	}
	every(kubeletLeaseRenew, k.renew, &k.renewed, nil)
	every(kubeletStatusReport, func(ctx context.Context, i int) error { return k.heartbeat(ctx, i, time.Now()) }, &k.reported, func(i int) bool {
		held := k.statusHeld.Load()
		return held != nil && (*held)(i)
	})
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		b.Logf("kubelets in the background: %d Lease renewals, %d status reports (%d held), %d failed", k.renewed.Load(), k.reported.Load(), k.held.Load(), k.failed.Load())
	})
	return k
}

// holdStatus leaves out, until release, the background's status reports of
// the nodes hold names: their kubelets skip a beat (one report in 5 minutes).
func (k *fleetKubelets) holdStatus(hold func(i int) bool) (release func()) {
	k.statusHeld.Store(&hold)
	return func() { k.statusHeld.Store(nil) }
}

// renew renews node i's Lease as its kubelet does: an update of the Lease
// it last wrote, read again when someone else changed it.
func (k *fleetKubelets) renew(ctx context.Context, i int) error {
	k.mu[i].Lock()
	defer k.mu[i].Unlock()
	leases := k.f.admin.CoordinationV1().Leases(kubeletLeaseNamespace)
	for range 2 {
		l := k.leases[i].DeepCopy()
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		got, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			k.leases[i] = got
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		if got, err = leases.Get(ctx, l.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		k.leases[i] = got
	}
	return fmt.Errorf("lease of %s: conflict twice", fleetNodeName(i))
}

// heartbeat reports node i's status as its kubelet does when nothing but
// the time changed.
func (k *fleetKubelets) heartbeat(ctx context.Context, i int, beat time.Time) error {
	_, err := k.f.admin.CoreV1().Nodes().PatchStatus(ctx, fleetNodeName(i), kubeletHeartbeat(beat))
	return err
}

// leaseRound: every node for which renew says so renews its Lease once.
func (k *fleetKubelets) leaseRound(b *testing.B, renew func(i int) bool) {
	fleetParallel(k.f.nodesN, func(i int) {
		if !renew(i) {
			return
		}
		if err := k.renew(b.Context(), i); err != nil {
			b.Error(err)
		}
	})
}
