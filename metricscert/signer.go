package metricscert

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"github.com/servicegroup/servicegroup/internal/pki"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Options of the signer.
type Options struct {
	// CASecretNamespace/CASecretName hold the CA (made when missing).
	CASecretNamespace, CASecretName string
	// BundleName is the ConfigMap the CA's certificate is published in
	// (key ca.crt), for the scrapers, in each of BundleNamespaces (where
	// the ServiceMonitors are: prometheus-operator reads it from the
	// ServiceMonitor's namespace).
	BundleNamespaces []string
	BundleName       string
	// Requesters are the users (ServiceAccounts) that may ask.
	Requesters []string
	// MaxLifetime caps a certificate's lifetime (and is the lifetime of
	// one whose request sets no expirationSeconds).
	MaxLifetime time.Duration
}

// DefaultOptions are the shipped names: the CA in the controller's
// namespace, the bundle beside the ServiceMonitors (the wrapper's and
// CoreDNS's in edge-system, the controller's in servicegroup-system).
// The wrappers and the nodes' CoreDNS ask.
func DefaultOptions() Options {
	return Options{
		CASecretNamespace: "servicegroup-system", CASecretName: "servicegroup-metrics-serving-ca",
		BundleNamespaces: []string{"edge-system", "servicegroup-system"}, BundleName: "servicegroup-metrics-serving-ca",
		Requesters:  []string{"system:serviceaccount:edge-system:servicegroup-wrapper", "system:serviceaccount:edge-system:coredns-gridhosts"},
		MaxLifetime: 30 * 24 * time.Hour,
	}
}

// minLifetime is the shortest certificate the signer issues (the
// apiserver's own floor for expirationSeconds).
const minLifetime = 10 * time.Minute

// Signer approves or denies, then signs, the CSRs for SignerName.
type Signer struct {
	opts  Options
	kube  kubernetes.Interface
	ca    *pki.CA
	queue workqueue.TypedRateLimitingInterface[string]
	csrs  cache.Indexer
	now   func() time.Time
}

// New makes a Signer; Run starts it.
func New(opts Options, kube kubernetes.Interface) *Signer {
	return &Signer{opts: opts, kube: kube, now: time.Now,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "metrics-serving-csrs"})}
}

// Run makes or reads the CA, publishes it and serves requests until ctx
// ends. Run it on the leader only.
func (s *Signer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("signer", SignerName)
	// The apiserver may not be up yet: the CA is retried until it is.
	if err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		ca, err := ensureCA(ctx, s.kube, s.opts.CASecretNamespace, s.opts.CASecretName, s.now())
		for _, ns := range s.opts.BundleNamespaces {
			if err == nil {
				err = publish(ctx, s.kube, ns, s.opts.BundleName, ca.CertPEM)
			}
		}
		if err != nil {
			logger.Error(err, "Metrics serving CA not ready; retrying")
			return false, nil
		}
		s.ca = ca
		return true, nil
	}); err != nil {
		return nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(s.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", SignerName).String()
	}))
	inf := factory.Certificates().V1().CertificateSigningRequests().Informer()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }}); err != nil {
		return err
	}
	s.csrs = inf.GetIndexer()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer s.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	logger.Info("Signing metrics serving certificates", "bundle", s.opts.BundleName, "bundleNamespaces", s.opts.BundleNamespaces)
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for s.next(ctx) {
	}
	return nil
}

func (s *Signer) next(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	obj, exists, err := s.csrs.GetByKey(key)
	if err == nil && exists {
		err = s.handle(ctx, obj.(*certificatesv1.CertificateSigningRequest))
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Metrics serving CSR", "csr", key)
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// handle takes one CSR a step: approve or deny a pending one, sign an
// approved one. Whoever approved it, it is signed only if it passes the
// same checks.
func (s *Signer) handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if csr.Spec.SignerName != SignerName || len(csr.Status.Certificate) > 0 ||
		hasCondition(csr, certificatesv1.CertificateDenied) || hasCondition(csr, certificatesv1.CertificateFailed) {
		return nil
	}
	req, d, err := s.review(ctx, csr)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("csr", csr.Name, "requester", csr.Spec.Username)
	if d != nil {
		if hasCondition(csr, certificatesv1.CertificateApproved) {
			logger.Info("Not signing an approved metrics serving CSR", "reason", d.reason, "message", d.message)
			return s.setCondition(ctx, csr, certificatesv1.CertificateFailed, d)
		}
		logger.Info("Denied a metrics serving CSR", "reason", d.reason, "message", d.message)
		return s.setCondition(ctx, csr, certificatesv1.CertificateDenied, d)
	}
	if !hasCondition(csr, certificatesv1.CertificateApproved) {
		approved := csr.DeepCopy()
		approved.Status.Conditions = append(approved.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "RequesterNodeMatches",
			Message: "every name is the requester's node's", LastUpdateTime: metav1.NewTime(s.now()),
		})
		updated, err := s.kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, approved, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("approving: %w", err)
		}
		csr = updated
	}
	lifetime := s.opts.MaxLifetime
	if e := csr.Spec.ExpirationSeconds; e != nil {
		lifetime = min(max(time.Duration(*e)*time.Second, minLifetime), lifetime)
	}
	certPEM, err := sign(s.ca, req, slices.Contains(csr.Spec.Usages, certificatesv1.UsageKeyEncipherment), lifetime, s.now())
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	signed := csr.DeepCopy()
	signed.Status.Certificate = certPEM
	if _, err := s.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, signed, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("issuing: %w", err)
	}
	logger.Info("Signed a metrics serving certificate", "node", csr.Spec.Extra[NodeNameExtra], "lifetime", lifetime)
	return nil
}

// review returns the parsed request, or why it is refused; err is for
// what a retry may fix.
func (s *Signer) review(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, *denial, error) {
	nodeName, d := requesterNode(csr, s.opts.Requesters)
	if d != nil {
		return nil, d, nil
	}
	req, d := parseRequest(csr)
	if d != nil {
		return nil, d, nil
	}
	if d := checkUsages(csr); d != nil {
		return nil, d, nil
	}
	node, err := s.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &denial{ReasonNodeNotFound, fmt.Sprintf("node %q does not exist", nodeName)}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading node %q: %w", nodeName, err)
	}
	if d := checkNames(req, node); d != nil {
		return nil, d, nil
	}
	return req, nil, nil
}

func (s *Signer) setCondition(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType, d *denial) error {
	out := csr.DeepCopy()
	out.Status.Conditions = append(out.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: d.reason, Message: d.message, LastUpdateTime: metav1.NewTime(s.now()),
	})
	var err error
	if t == certificatesv1.CertificateDenied {
		_, err = s.kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, out, metav1.UpdateOptions{})
	} else {
		_, err = s.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, out, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("setting %s: %w", t, err)
	}
	return nil
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
