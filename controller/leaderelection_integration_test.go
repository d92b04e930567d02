package controller

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/internal/controllerlease"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/internal/version"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestLeaderElection runs two controllers with leader election: only the
// leader writes (CRDs, children, status, events); when it stops, the other
// takes over and reconciles new changes.
func TestLeaderElection(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	e.node(t, "a", map[string]string{"site": "one"})
	leased := func(o *Options) {
		o.LeaderElect = true
		o.ManageCRDs = true
		o.LeaderElectionNamespace = "default"
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	}
	fingerprints, err := crds.Fingerprints()
	if err != nil {
		t.Fatal(err)
	}
	published := controllerlease.Labels(version.Version, fingerprints)
	if len(published) != 1+len(fingerprints) || len(fingerprints) == 0 {
		t.Fatalf("labels %v for fingerprints %v", published, fingerprints)
	}
	_, wc1, stop1 := e.startController(t, func(o *Options) { leased(o); o.LeaderElectionIdentity = "first" })
	testwait.Eventually(t.Context(), t, 20*time.Second, "first leads", func(ctx context.Context) error {
		l, err := e.kube.CoordinationV1().Leases("default").Get(ctx, "application-grid-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "first" {
			return fmt.Errorf("holder %v", l.Spec.HolderIdentity)
		}
		// What kubectl grid doctor compares the cluster's CRDs with.
		for k, v := range published {
			if l.Labels[k] != v {
				return fmt.Errorf("lease labels %v, want %v among them", l.Labels, published)
			}
		}
		return nil
	})
	_, wc2, _ := e.startController(t, func(o *Options) { leased(o); o.LeaderElectionIdentity = "second" })

	if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, simpleDeploymentGrid("default", "web", "site", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDeployments(t, "default", "web", "web-one")
	if w := wc1.list(notLease); len(w) == 0 {
		t.Errorf("the leader wrote nothing")
	}
	if w := wc2.list(notLease); len(w) != 0 {
		t.Errorf("the standby wrote: %v", w)
	}

	stop1()
	e.node(t, "b", map[string]string{"site": "two"})
	e.waitDeployments(t, "default", "web", "web-one", "web-two")
	if w := wc2.list(notLease); len(w) == 0 {
		t.Errorf("the new leader wrote nothing")
	}
}

// TestMetricsAndHealth: /healthz, /readyz and /metrics with the workqueue
// metrics of every named queue and the reconcile counters.
func TestMetricsAndHealth(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	m, _, _ := e.startController(t, func(o *Options) {
		o.MetricsBindAddress, o.HealthBindAddress = "127.0.0.1:0", "127.0.0.1:0"
	})
	if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, simpleDeploymentGrid("default", "web", "site", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		testwait.Eventually(t.Context(), t, 20*time.Second, p+" answers 200", testwait.HTTPOK("http://"+m.Addr("health")+p))
	}
	testwait.Eventually(t.Context(), t, 20*time.Second, "metrics exported", func(ctx context.Context) error {
		code, body, err := testwait.Get(ctx, "http://"+m.Addr("metrics")+"/metrics")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		for _, want := range []string{
			`workqueue_adds_total{name="deploymentgrid"}`,
			`workqueue_adds_total{name="statefulsetgrid"}`,
			`workqueue_adds_total{name="servicegrid"}`,
			`workqueue_depth{name="deploymentgrid"}`,
			`workqueue_work_duration_seconds_count{name="deploymentgrid"}`,
			`application_grid_controller_reconcile_total{kind="DeploymentGrid",result="success"}`,
			`application_grid_controller_reconcile_duration_seconds_count{kind="DeploymentGrid"}`,
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("missing %s", want)
			}
		}
		return nil
	})
}

// TestReleasesLeaseAfterWorkersStop: on SIGTERM (its context ending) the
// leader gives up its Lease only once its workers have returned, so the next
// leader never works beside it; and it does give it up.
func TestReleasesLeaseAfterWorkersStop(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	o := DefaultOptions()
	o.Config = e.cp.Config
	o.LeaderElectionNamespace, o.LeaderElectionIdentity = "default", "only"
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 200*time.Millisecond
	o.ManageCRDs, o.SuperEdgeLock = false, ""
	o.MetricsBindAddress, o.HealthBindAddress = "0", "0"
	m, err := NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	holder := func(ctx context.Context) (string, error) {
		l, err := e.kube.CoordinationV1().Leases("default").Get(ctx, "application-grid-controller", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if l.Spec.HolderIdentity == nil {
			return "", nil
		}
		return *l.Spec.HolderIdentity, nil
	}
	working := make(chan struct{})
	var releasedWhileWorking []string
	m.workHook = func(ctx context.Context) error {
		close(working)
		<-ctx.Done()
		// Workers still finishing (a slow write, a drain): the Lease must
		// stay held all along. Watch it for ten renew periods.
		for range 10 {
			h, err := holder(context.Background())
			if err != nil {
				t.Errorf("read Lease while stopping: %v", err)
			}
			if h != "only" {
				releasedWhileWorking = append(releasedWhileWorking, fmt.Sprintf("holder %q", h))
				return nil
			}
			time.Sleep(o.RetryPeriod)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-working:
	case <-time.After(testwait.Floor):
		t.Fatal("never started leading")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(testwait.Floor):
		t.Fatal("Run did not return")
	}
	if len(releasedWhileWorking) > 0 {
		t.Fatalf("Lease released while the workers were still running: %v", releasedWhileWorking)
	}
	if h, err := holder(t.Context()); err != nil || h != "" {
		t.Fatalf("after Run returned the Lease is held by %q (%v), want released", h, err)
	}
}
