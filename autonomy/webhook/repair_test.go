package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestRegistrationRepaired: against a real kube-apiserver, a replica that
// does not lead registers nothing; the leader registers the webhook while
// a grid opts in, and puts the registration back, with a Warning Event
// saying what it undid, when someone edits it (one webhook left, failing
// closed, with no CA) and when someone deletes it.
func TestRegistrationRepaired(t *testing.T) {
	t.Parallel() // its own control plane
	_, ctx := ktesting.NewTestContext(t)
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	grids := versioned.NewForConfigOrDie(cp.Config)
	createOptInGrid(ctx, t, grids)
	opts := localOptions(t)
	srv, err := New(opts, kube, grids, eventRecorder(ctx, t, kube), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var leading atomic.Bool
	var asked atomic.Int64 // refreshes that asked whether this replica leads
	srv.Leading = func() bool { asked.Add(1); return leading.Load() }
	webhookCtx, stopWebhook := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(webhookCtx) }()
	t.Cleanup(func() {
		stopWebhook()
		if err := <-done; err != nil {
			t.Errorf("the webhook: %v", err)
		}
	})

	configs := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	testwait.Eventually(ctx, t, 0, "a refresh asked whether this replica leads", func(context.Context) error {
		if asked.Load() == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if _, err := configs.Get(ctx, opts.ConfigurationName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("registered by a replica that does not lead: %v", err)
	}
	leading.Store(true)
	var uid types.UID
	registered := func(ctx context.Context) error {
		cur, err := configs.Get(ctx, opts.ConfigurationName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(cur.Webhooks) != 2 {
			return fmt.Errorf("%d webhooks", len(cur.Webhooks))
		}
		for _, w := range cur.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 || w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
				return fmt.Errorf("webhook %s: caBundle %d bytes, failure policy %v", w.Name, len(w.ClientConfig.CABundle), w.FailurePolicy)
			}
		}
		uid = cur.UID
		return nil
	}
	testwait.Eventually(ctx, t, 0, "the leader registered the webhook", registered)

	// Edited: one webhook left, failing closed, with no CA.
	cur, err := configs.Get(ctx, opts.ConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := cur.Webhooks[0]
	w.FailurePolicy, w.ClientConfig.CABundle = ptr.To(admissionregistrationv1.Fail), nil
	cur.Webhooks = []admissionregistrationv1.ValidatingWebhook{w}
	edited, err := configs.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testwait.Eventually(ctx, t, 10*time.Second, "the edited registration put back", func(ctx context.Context) error {
		if err := registered(ctx); err != nil {
			return err
		}
		if uid != edited.UID {
			return fmt.Errorf("re-created (uid %s, was %s)", uid, edited.UID)
		}
		return nil
	})
	t.Logf("the edited registration put back in %s", time.Since(start).Round(time.Millisecond))
	testwait.Eventually(ctx, t, 0, "a Warning Event on the registration: edited", func(ctx context.Context) error {
		return restoredEvent(ctx, kube, opts.ConfigurationName, "was edited")
	})

	// Deleted.
	if err := configs.Delete(ctx, opts.ConfigurationName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	testwait.Eventually(ctx, t, 10*time.Second, "the deleted registration put back", func(ctx context.Context) error {
		if err := registered(ctx); err != nil {
			return err
		}
		if uid == edited.UID {
			return fmt.Errorf("still the deleted one (uid %s)", uid)
		}
		return nil
	})
	t.Logf("the deleted registration put back in %s", time.Since(start).Round(time.Millisecond))
	testwait.Eventually(ctx, t, 0, "a Warning Event on the registration: deleted", func(ctx context.Context) error {
		return restoredEvent(ctx, kube, opts.ConfigurationName, "was deleted")
	})

	// A label of someone else's changes nothing of ours: no Event says it
	// was undone.
	if _, err := configs.Patch(ctx, opts.ConfigurationName, types.MergePatchType, []byte(`{"metadata":{"labels":{"someone":"else"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	events, err := kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + ReasonRegistrationRestored})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events.Items); n != 2 {
		t.Errorf("%d %s Events after a label of someone else's, want 2 (edited, deleted)", n, ReasonRegistrationRestored)
	}
}

// restoredEvent: a Warning AutonomyWebhookRestored Event on configuration
// whose message contains what.
func restoredEvent(ctx context.Context, kube kubernetes.Interface, configuration, what string) error {
	events, err := kube.CoreV1().Events("").List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=ValidatingWebhookConfiguration,involvedObject.name=" + configuration + ",reason=" + ReasonRegistrationRestored})
	if err != nil {
		return err
	}
	var messages []string
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, what) {
			return nil
		}
		messages = append(messages, e.Message)
	}
	slices.Sort(messages)
	return fmt.Errorf("no Warning %s Event saying %q: %q", ReasonRegistrationRestored, what, messages)
}
