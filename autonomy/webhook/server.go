package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/autonomy/webhook/review"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/topology"
)

// Server is the autonomy webhook of one controller replica.
type Server struct {
	opts     Options
	kube     kubernetes.Interface
	state    *state
	nodes    *nodes
	cert     *servingCert
	reg      *registration
	watch    *configWatch
	events   *eventLog
	metrics  *metrics
	listener net.Listener
	now      func() time.Time
	// RequireNodeRestrictedKeys gives autonomy only to grids keyed on labels
	// a node cannot set on itself (the controller's
	// --require-node-restricted-grid-keys: other grids get no children).
	RequireNodeRestrictedKeys bool
	// Leading tells whether this replica leads (nil: always): only the
	// leader registers the configuration and puts it back when edited or
	// deleted, so that two releases' replicas in a rollout do not undo
	// each other's.
	Leading func() bool

	unsyncedOnce sync.Once
}

// New binds the webhook's listener (so a taken port fails start-up, not a
// later call) and builds what it needs; Run serves.
func New(opts Options, kube kubernetes.Interface, grids versioned.Interface, recorder record.EventRecorder, reg prometheus.Registerer) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", opts.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("autonomy webhook: listen on %s: %w", opts.BindAddress, err)
	}
	dns, ips := opts.servingNames()
	s := &Server{
		opts:     opts,
		kube:     kube,
		state:    newState(grids, 10*time.Minute),
		cert:     &servingCert{kube: kube, namespace: opts.secretNamespace(), name: opts.SecretName, dns: dns, ips: ips},
		reg:      &registration{kube: kube, opts: &opts},
		watch:    newConfigWatch(kube, opts.ConfigurationName),
		events:   newEventLog(recorder),
		metrics:  newMetrics(reg),
		listener: l,
		now:      time.Now,
	}
	s.nodes = newNodes(kube, func() time.Time { return s.now() })
	return s, nil
}

// Addr is where the webhook listens.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Run serves the webhook until ctx ends: it makes or reads the serving
// certificate, starts its informers, and every few seconds refreshes the
// nodeunits' metrics and, while leading, the registration (registered only
// while some grid opted in, put back when someone else edits or deletes
// it).
func (s *Server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("autonomy-webhook")
	ctx = klog.NewContext(ctx, logger)
	// The certificate first: without it nothing can be served. The
	// apiserver may not be up yet; the Secret is retried until it is.
	if err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := s.cert.ensure(ctx, s.now()); err != nil {
			logger.Error(err, "Serving certificate; retrying")
			return false, nil
		}
		return true, nil
	}); err != nil {
		_ = s.listener.Close()
		return nil
	}
	s.state.start(ctx)
	s.watch.start(ctx)

	mux := http.NewServeMux()
	mux.Handle(podsPath, s)
	mux.Handle(nodesPath, s)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.cert.GetCertificate},
		ErrorLog:          nil,
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(s.listener, "", "") }()
	logger.Info("Serving the autonomy webhook", "address", s.Addr(), "decisionWindow", s.opts.DecisionWindow)

	refresh := time.NewTicker(5 * time.Second)
	defer refresh.Stop()
	certCheck := time.NewTicker(time.Hour)
	defer certCheck.Stop()
	for {
		select {
		case <-ctx.Done():
			shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
			return nil
		case err := <-served:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("autonomy webhook: %w", err)
		case <-certCheck.C:
			if err := s.cert.ensure(ctx, s.now()); err != nil {
				logger.Error(err, "Serving certificate")
			}
		case <-refresh.C:
			s.refresh(ctx)
		case <-s.watch.changed:
			s.repair(ctx)
		}
	}
}

// refresh updates the metrics and the registration from the informers.
func (s *Server) refresh(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if !s.state.hasSynced() {
		return
	}
	grids := s.grids(ctx)
	tracked := s.nodes.trackedUnits(ctx)
	now := s.now()
	s.metrics.setUnits(autonomy.Units(tracked, grids, now, s.opts.DecisionWindow))
	if s.leading() {
		if err := s.reg.sync(ctx, len(grids) > 0, s.cert.caBundle()); err != nil {
			logger.Error(err, "Autonomy webhook registration")
		}
	}
	s.events.prune(now.Add(-10 * time.Minute))
}

func (s *Server) leading() bool { return s.Leading == nil || s.Leading() }

// repair puts the registration back after someone else edited or deleted
// it, with a Warning Event on it saying what was undone.
func (s *Server) repair(ctx context.Context) {
	if !s.leading() {
		return
	}
	cur, ok, err := s.watch.current()
	if !ok {
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reading the autonomy webhook registration")
		}
		return
	}
	undone, err := s.reg.repair(ctx, cur, s.cert.caBundle())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Putting the autonomy webhook registration back")
		return
	}
	if undone == "" {
		return
	}
	message := fmt.Sprintf("ValidatingWebhookConfiguration %s was %s while grids carry %s: registered again as this controller writes it", s.opts.ConfigurationName, undone, autonomy.DurationAnnotation)
	klog.FromContext(ctx).Info("Put the autonomy webhook registration back", "configuration", s.opts.ConfigurationName, "undone", undone)
	ref := &corev1.ObjectReference{Kind: "ValidatingWebhookConfiguration", APIVersion: "admissionregistration.k8s.io/v1", Name: s.opts.ConfigurationName, UID: s.reg.appliedUID}
	s.events.recorder.Event(ref, corev1.EventTypeWarning, ReasonRegistrationRestored, message)
}

// grids are the opted-in grids; an invalid annotation gets a Warning Event
// on its grid, once per value.
func (s *Server) grids(ctx context.Context) []autonomy.Grid {
	opted, bad := s.state.grids()
	for _, b := range bad {
		ref := &corev1.ObjectReference{Kind: b.ref.Kind, APIVersion: "superedge.io/v1", Namespace: b.ref.Namespace, Name: b.ref.Name, UID: typesUID(b.ref.UID)}
		s.events.recorder.Event(ref, corev1.EventTypeWarning, ReasonInvalidDuration, b.err.Error()+": this grid gives its nodeunits no autonomy")
		klog.FromContext(ctx).Info("Invalid autonomy annotation", "kind", b.ref.Kind, "grid", klog.KRef(b.ref.Namespace, b.ref.Name), "err", b.err)
	}
	if !s.RequireNodeRestrictedKeys {
		return opted
	}
	kept := opted[:0]
	for _, g := range opted {
		if topology.IsNodeRestrictedKey(g.Key) {
			kept = append(kept, g)
		}
	}
	return kept
}

// Paths of the two webhooks: registered in the configuration, served by
// ServeHTTP.
const (
	podsPath  = "/autonomy/pods"
	nodesPath = "/autonomy/nodes"
)

// maxReviewBytes bounds a request body: an AdmissionReview of a pod or a
// node with its old object.
const maxReviewBytes = 3 << 20

// ServeHTTP answers one AdmissionReview.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(r.Context())
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil || len(body) > maxReviewBytes {
		http.Error(w, "request body unreadable or larger than 3 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	req, err := review.Read(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	allowed, message := s.review(r.Context(), req)
	if !allowed {
		logger.V(2).Info("Withheld", "action", req.Action, "node", req.Node, "pod", klog.KRef(req.Pod.Namespace, req.Pod.Name), "why", message)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(req.Respond(allowed, message))
}

// review decides one request: whether to let it through, and if not why.
func (s *Server) review(ctx context.Context, req *review.Request) (bool, string) {
	if req.Action == "" {
		return true, ""
	}
	if !s.state.hasSynced() {
		s.unsyncedOnce.Do(func() {
			klog.FromContext(ctx).Info("Not synced yet: letting the node lifecycle controller's writes through")
		})
		s.metrics.reviews.WithLabelValues(string(req.Action), "allowed").Inc()
		return true, ""
	}
	node, err := s.freshNode(ctx, req)
	if err != nil {
		// Not knowing the node, the rule cannot tell: the default applies.
		klog.FromContext(ctx).Info("Letting the node lifecycle controller's write through: reading its node failed", "node", req.Node, "err", err)
		s.metrics.reviews.WithLabelValues(string(req.Action), "allowed").Inc()
		return true, ""
	}
	grids := s.grids(ctx)
	members, err := s.unitsOf(ctx, node, grids)
	if err != nil {
		klog.FromContext(ctx).Info("Letting the node lifecycle controller's write through: reading its nodeunits failed", "node", node.Name, "err", err)
		s.metrics.reviews.WithLabelValues(string(req.Action), "allowed").Inc()
		return true, ""
	}
	now := s.now()
	d := autonomy.Decide(node, members, grids, now, s.opts.DecisionWindow)
	decision := "allowed"
	if d.Withhold {
		decision = "withheld"
	}
	s.metrics.reviews.WithLabelValues(string(req.Action), decision).Inc()
	if !d.Autonomous() {
		return true, ""
	}
	if d.Stale {
		return false, "servicegroup autonomy: " + node.Name + " is Ready again: this write is from the node lifecycle controller's view of before its kubelet came back, which decides its pods' readiness again"
	}
	eventType, reason, message := describe(node.Name, d)
	if !req.DryRun {
		s.events.once(nodeRef(node.Name), d.Status.Since, eventType, reason, message, now)
		if req.Action == review.MarkNotReady && d.Withhold && d.Status.State == autonomy.CutOff {
			pod := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: req.Pod.Namespace, Name: req.Pod.Name, UID: req.Pod.UID}
			s.events.once(pod, d.Status.Since, corev1.EventTypeNormal, ReasonKeptReady, "kept Ready: "+message, now)
		}
	}
	if !d.Withhold {
		return true, ""
	}
	return false, "servicegroup autonomy: " + message
}

// freshNode is the node a request is about as the node lifecycle
// controller sees it: a taint request carries it (with its status); for a
// pod it is read from the apiserver (the node lifecycle controller writes
// the node's status just before it marks the pods).
func (s *Server) freshNode(ctx context.Context, req *review.Request) (autonomy.Node, error) {
	if req.NodeObj != nil {
		return autonomy.NodeOf(req.NodeObj), nil
	}
	return s.nodes.node(ctx, req.Node)
}

// unitsOf are the nodes of every nodeunit n belongs to under the opted-in
// grids.
func (s *Server) unitsOf(ctx context.Context, n autonomy.Node, grids []autonomy.Grid) (autonomy.Nodes, error) {
	var out autonomy.Nodes
	done, seen := map[autonomy.Unit]bool{}, map[string]bool{}
	for _, g := range grids {
		v := n.Labels[g.Key]
		u := autonomy.Unit{Key: g.Key, Value: v}
		if v == "" || done[u] {
			continue
		}
		done[u] = true
		members, err := s.nodes.unit(ctx, u)
		if err != nil {
			return nil, err
		}
		for _, m := range members {
			if !seen[m.Name] {
				seen[m.Name] = true
				out = append(out, m)
			}
		}
	}
	return out, nil
}
