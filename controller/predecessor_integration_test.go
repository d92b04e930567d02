package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

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
	record := func() map[string]string {
		now := metav1.Now()
		data, _ := json.Marshal(resourcelock.LeaderElectionRecord{
			HolderIdentity: "master-0_5f0e2f4c", LeaseDurationSeconds: 3, AcquireTime: now, RenewTime: now,
		})
		return map[string]string{superEdgeLeaderAnnotation: string(data)}
	}
	lock := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "application-grid-controller", Annotations: record()}} //nolint:staticcheck // SuperEdge's lock kind
	if _, err := se.CoreV1().Endpoints("kube-system").Create(ctx, lock, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	renewing, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for renewing.Err() == nil {
			ep, err := se.CoreV1().Endpoints("kube-system").Get(renewing, lock.Name, metav1.GetOptions{})
			if err == nil {
				ep.Annotations = record()
				_, _ = se.CoreV1().Endpoints("kube-system").Update(renewing, ep, metav1.UpdateOptions{})
			}
			select {
			case <-renewing.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	defer func() { stopRenewing(); <-renewed }()

	e.node(t, "n1", map[string]string{"zone": "a"})
	if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, simpleDeploymentGrid("default", "web", "zone", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startController(t, func(o *Options) { o.RetryPeriod = 200 * time.Millisecond })

	eventually(t, 20*time.Second, "Warning PredecessorActive on SuperEdge's lock", func(ctx context.Context) error {
		evs, err := e.warningEvents(ctx, "kube-system", lock.Name, ReasonPredecessorActive)
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

	stopRenewing()
	<-renewed
	e.waitDeployments(t, "default", "web", "web-a")
}

// TestStopsWhenSuperEdgeReturns: SuperEdge's controller started again while
// this one leads (a rollback, a forgotten replica) stops this one's workers,
// with a Warning Event on its lock and /readyz saying so; they start again
// when its lease runs out.
func TestStopsWhenSuperEdgeReturns(t *testing.T) {
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

	record := func() map[string]string {
		now := metav1.Now()
		data, _ := json.Marshal(resourcelock.LeaderElectionRecord{
			HolderIdentity: "master-0_5f0e2f4c", LeaseDurationSeconds: 3, AcquireTime: now, RenewTime: now,
		})
		return map[string]string{superEdgeLeaderAnnotation: string(data)}
	}
	lock := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "application-grid-controller", Annotations: record()}}
	if _, err := se.CoreV1().ConfigMaps("kube-system").Create(ctx, lock, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	renewing, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for renewing.Err() == nil {
			cm, err := se.CoreV1().ConfigMaps("kube-system").Get(renewing, lock.Name, metav1.GetOptions{})
			if err == nil {
				cm.Annotations = record()
				_, _ = se.CoreV1().ConfigMaps("kube-system").Update(renewing, cm, metav1.UpdateOptions{})
			}
			select {
			case <-renewing.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	defer func() { stopRenewing(); <-renewed }()

	eventually(t, 20*time.Second, "Warning PredecessorActive and /readyz saying the workers stopped", func(ctx context.Context) error {
		evs, err := e.warningEvents(ctx, "kube-system", lock.Name, ReasonPredecessorActive)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return fmt.Errorf("no Event")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.Addr("health")+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "not reconciling") {
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

	stopRenewing()
	<-renewed
	e.waitDeployments(t, "default", "web", "web-a", "web-b")
}
