package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestWaitsForSuperEdgeLeader: while SuperEdge's controller renews its leader
// lock (an Endpoints kube-system/application-grid-controller, its default
// lock kind), this controller only says so (Warning Event on the lock, log)
// and creates nothing; once the renewals stop and the lease runs out it takes over.
func TestWaitsForSuperEdgeLeader(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	se := e.superEdgeClient()
	lock, release := holdSuperEdgeLock(t, se, "Endpoints")

	e.node(t, "n1", map[string]string{"zone": "a"})
	if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, simpleDeploymentGrid("default", "web", "zone", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startController(t, func(o *Options) { o.RetryPeriod = 200 * time.Millisecond })

	testwait.Eventually(t.Context(), t, 20*time.Second, "Warning PredecessorActive on SuperEdge's lock", func(ctx context.Context) error {
		evs, err := e.warningEvents(ctx, "kube-system", lock, ReasonPredecessorActive)
		if err != nil {
			return err
		}
		if len(evs) == 0 || evs[0].Type != corev1.EventTypeWarning {
			return fmt.Errorf("events %v", evs)
		}
		return nil
	})
	// The Event is recorded before the controller starts anything, and the
	// lock is still renewed: nothing may have been created.
	if names, err := e.deploymentNames(ctx, "default", "web"); err != nil || len(names) != 0 {
		t.Fatalf("created %v (%v) while SuperEdge's controller leads", names, err)
	}

	release()
	e.waitDeployments(t, "default", "web", "web-a")
}

// TestStopsWhenSuperEdgeReturns: SuperEdge's controller started again while
// this one leads (a rollback, a forgotten replica) stops this one's workers,
// with a Warning Event on its lock and /readyz saying so; they start again
// when its lease runs out.
func TestStopsWhenSuperEdgeReturns(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	se := e.superEdgeClient()
	e.node(t, "n1", map[string]string{"zone": "a"})
	if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, simpleDeploymentGrid("default", "web", "zone", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, wc, _ := e.startController(t, func(o *Options) {
		o.RetryPeriod = 200 * time.Millisecond
		o.HealthBindAddress = "127.0.0.1:0"
	})
	e.waitDeployments(t, "default", "web", "web-a")

	lock, release := holdSuperEdgeLock(t, se, "ConfigMap")

	testwait.Eventually(t.Context(), t, 20*time.Second, "Warning PredecessorActive and /readyz saying the workers stopped", func(ctx context.Context) error {
		evs, err := e.warningEvents(ctx, "kube-system", lock, ReasonPredecessorActive)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return fmt.Errorf("no Event")
		}
		_, body, err := testwait.Get(ctx, "http://"+m.Addr("health")+"/readyz")
		if err != nil {
			return err
		}
		if !strings.Contains(body, "not reconciling") {
			return fmt.Errorf("/readyz: %s", body)
		}
		return nil
	})
	// The workers have returned: a new nodeunit gets nothing while
	// SuperEdge's controller renews its lock.
	wc.reset()
	e.node(t, "n2", map[string]string{"zone": "b"})
	time.Sleep(2 * time.Second) // ten check periods: time enough for a running worker to create web-b
	if names, err := e.deploymentNames(ctx, "default", "web"); err != nil || len(names) != 1 {
		t.Fatalf("Deployments %v (%v) while SuperEdge's controller leads, want only web-a", names, err)
	}
	if w := wc.list(notEvent); len(w) != 0 {
		t.Fatalf("wrote %v while SuperEdge's controller leads", w)
	}

	release()
	e.waitDeployments(t, "default", "web", "web-a", "web-b")
}

// holdSuperEdgeLock plays SuperEdge's running controller: its leader lock
// kube-system/application-grid-controller, of kind "Endpoints" (its default)
// or "ConfigMap", created and renewed every 500ms until release (or the
// test's end). It returns the lock's name.
func holdSuperEdgeLock(t *testing.T, se kubernetes.Interface, kind string) (string, func()) {
	t.Helper()
	const name = "application-grid-controller"
	record := func() map[string]string {
		now := metav1.Now()
		data, _ := json.Marshal(resourcelock.LeaderElectionRecord{
			HolderIdentity: "master-0_5f0e2f4c", LeaseDurationSeconds: 3, AcquireTime: now, RenewTime: now,
		})
		return map[string]string{superEdgeLeaderAnnotation: string(data)}
	}
	meta := metav1.ObjectMeta{Namespace: "kube-system", Name: name, Annotations: record()}
	var create, renew func(context.Context) error
	switch kind {
	case "Endpoints":
		eps := se.CoreV1().Endpoints("kube-system") //nolint:staticcheck // SuperEdge's lock kind
		create = func(ctx context.Context) error {
			_, err := eps.Create(ctx, &corev1.Endpoints{ObjectMeta: meta}, metav1.CreateOptions{}) //nolint:staticcheck // SuperEdge's lock kind
			return err
		}
		renew = func(ctx context.Context) error {
			ep, err := eps.Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				ep.Annotations = record()
				_, err = eps.Update(ctx, ep, metav1.UpdateOptions{})
			}
			return err
		}
	case "ConfigMap":
		cms := se.CoreV1().ConfigMaps("kube-system")
		create = func(ctx context.Context) error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}, metav1.CreateOptions{})
			return err
		}
		renew = func(ctx context.Context) error {
			cm, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				cm.Annotations = record()
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			}
			return err
		}
	default:
		t.Fatalf("SuperEdge's lock kinds are Endpoints and ConfigMap, not %q", kind)
	}
	if err := create(t.Context()); err != nil {
		t.Fatal(err)
	}
	renewing, stopRenewing := context.WithCancel(t.Context())
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for renewing.Err() == nil {
			_ = renew(renewing) // a missed renewal is retried; the lease outlasts several
			select {
			case <-renewing.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	release := func() { once.Do(func() { stopRenewing(); <-renewed }) }
	t.Cleanup(release)
	return name, release
}
