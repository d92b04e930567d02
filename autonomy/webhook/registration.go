package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/autonomy/webhook/review"
)

// FieldManager writes the webhook configuration (server-side apply).
const FieldManager = "application-grid-controller"

// managedByLabel marks the configuration as this controller's, so that it
// deletes only its own.
const managedByLabel = "app.kubernetes.io/managed-by"

// Names of the two webhooks in the configuration.
const (
	PodsWebhookName  = autonomy.PodsWebhookName
	NodesWebhookName = autonomy.NodesWebhookName
)

// configuration is the ValidatingWebhookConfiguration: two webhooks, each
// called only for the one write of the node lifecycle controller it may
// withhold, failing open.
func (o *Options) configuration(caBundle []byte) *acv1.ValidatingWebhookConfigurationApplyConfiguration {
	users := make([]string, len(o.NodeLifecycleUsers))
	for i, u := range o.NodeLifecycleUsers {
		users[i] = "'" + u + "'"
	}
	byNodeLifecycle := acv1.MatchCondition().WithName("node-lifecycle-controller").
		WithExpression("request.userInfo.username in [" + strings.Join(users, ", ") + "]")
	timeout := int32(o.Timeout.Seconds())
	webhook := func(name, path string, rule *acv1.RuleWithOperationsApplyConfiguration, cond *acv1.MatchConditionApplyConfiguration) *acv1.ValidatingWebhookApplyConfiguration {
		cc := acv1.WebhookClientConfig().WithCABundle(caBundle...)
		if o.URL != "" {
			cc.WithURL(strings.TrimSuffix(o.URL, "/") + path)
		} else {
			ns, svc, _ := o.serviceRef()
			cc.WithService(acv1.ServiceReference().WithNamespace(ns).WithName(svc).WithPort(443).WithPath(path))
		}
		return acv1.ValidatingWebhook().WithName(name).
			WithClientConfig(cc).
			WithRules(rule).
			WithMatchConditions(byNodeLifecycle, cond).
			WithFailurePolicy(admissionregistrationv1.Ignore).
			WithMatchPolicy(admissionregistrationv1.Equivalent).
			WithSideEffects(admissionregistrationv1.SideEffectClassNoneOnDryRun).
			WithTimeoutSeconds(timeout).
			WithAdmissionReviewVersions("v1")
	}
	rule := func(resource string) *acv1.RuleWithOperationsApplyConfiguration {
		return acv1.RuleWithOperations().WithOperations(admissionregistrationv1.Update).
			WithAPIGroups("").WithAPIVersions("v1").WithResources(resource)
	}
	return acv1.ValidatingWebhookConfiguration(o.ConfigurationName).
		WithLabels(map[string]string{managedByLabel: FieldManager, "app.kubernetes.io/part-of": "servicegroup"}).
		WithWebhooks(
			webhook(PodsWebhookName, podsPath, rule("pods/status"), acv1.MatchCondition().WithName("marks-pod-not-ready").WithExpression(
				"has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'False') && "+
					"has(oldObject.status.conditions) && oldObject.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')")),
			webhook(NodesWebhookName, nodesPath, rule("nodes"), acv1.MatchCondition().WithName("adds-unreachable-noexecute").WithExpression(
				"has(object.spec.taints) && object.spec.taints.exists(t, t.key == '"+review.UnreachableTaint+"' && t.effect == 'NoExecute') && "+
					"!(has(oldObject.spec.taints) && oldObject.spec.taints.exists(t, t.key == '"+review.UnreachableTaint+"' && t.effect == 'NoExecute'))")),
		)
}

// registration keeps the configuration registered while wanted, writing
// only when what it would write changed.
type registration struct {
	kube    kubernetes.Interface
	opts    *Options
	applied string // hash of the last configuration applied; "-" after a delete
	// The object as the last apply left it: an event with another
	// resourceVersion is someone else's write; another UID, a re-creation.
	appliedRV  string
	appliedUID types.UID
}

// sync registers the configuration (want) or removes it (!want).
func (r *registration) sync(ctx context.Context, want bool, caBundle []byte) error {
	client := r.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if !want {
		if r.applied == "-" {
			return nil
		}
		cur, err := client.Get(ctx, r.opts.ConfigurationName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case cur.Labels[managedByLabel] != FieldManager:
			return fmt.Errorf("ValidatingWebhookConfiguration %s is not ours (label %s=%q): left alone", r.opts.ConfigurationName, managedByLabel, cur.Labels[managedByLabel])
		default:
			err := client.Delete(ctx, r.opts.ConfigurationName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		r.applied = "-"
		return nil
	}
	cfg := r.opts.configuration(caBundle)
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	if hash == r.applied {
		return nil
	}
	got, err := client.Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("registering ValidatingWebhookConfiguration %s: %w", r.opts.ConfigurationName, err)
	}
	r.applied, r.appliedRV, r.appliedUID = hash, got.ResourceVersion, got.UID
	return nil
}

// repair applies the configuration again when this replica registered it
// and cur (nil: gone) is not what its last apply left, and says what that
// undid: "deleted", "edited", or "" (nothing of ours had changed, e.g. a
// label someone else added, or cur was older than the last apply).
func (r *registration) repair(ctx context.Context, cur *admissionregistrationv1.ValidatingWebhookConfiguration, caBundle []byte) (string, error) {
	if r.applied == "" || r.applied == "-" {
		return "", nil // not registered by this replica, or removed on purpose
	}
	if cur != nil && cur.ResourceVersion == r.appliedRV {
		return "", nil // our own write
	}
	prevRV, prevUID := r.appliedRV, r.appliedUID
	r.applied = "" // apply even though what it would write is unchanged
	if err := r.sync(ctx, true, caBundle); err != nil {
		return "", err
	}
	switch {
	case r.appliedUID != prevUID:
		return "deleted", nil
	case cur != nil && r.appliedRV != prevRV && r.appliedRV != cur.ResourceVersion:
		return "edited", nil
	}
	return "", nil
}
