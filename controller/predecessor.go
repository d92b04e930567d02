package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// SuperEdge's application-grid-controller, run with --leader-elect, keeps its
// lock in kube-system/application-grid-controller (options.go:
// ResourceName = its user agent, ResourceNamespace = kube-system), by default
// as an Endpoints object (--leader-elect-resource-lock=endpoints), or as a
// ConfigMap, annotated with the leader record. A Lease lock of that name is
// checked too, unless it is the very Lease this controller elects its leader
// with (then the two never lead together anyway).
const superEdgeLeaderAnnotation = resourcelock.LeaderElectionRecordAnnotationKey

// ParseSuperEdgeLock splits Options.SuperEdgeLock, "namespace/name", and
// says what is wrong with it: the namespace must be a DNS-1123 label, the
// name a DNS-1123 subdomain (an Endpoints, ConfigMap or Lease name).
func ParseSuperEdgeLock(lock string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(lock, "/")
	if !ok || namespace == "" || name == "" {
		return "", "", errors.New("want namespace/name")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return "", "", fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return namespace, name, nil
}

// predecessorWatch tells whether SuperEdge's controller still leads.
type predecessorWatch struct {
	kube            kubernetes.Interface
	namespace, name string
	clock           clock.PassiveClock
	// checkLease also checks a Lease of that name: off when it is the Lease
	// this controller itself elects with (then the election excludes SuperEdge).
	checkLease bool
	// seen is, per lock kind, the last record read and when it last changed
	// as measured here (a stale renewTime from a stopped leader stays put).
	seen map[string]observedRecord
}

type observedRecord struct {
	raw     string
	changed time.Time
}

// predecessorAlive: a held record renewed (by its own time, or as observed
// here) less than its lease duration ago.
func predecessorAlive(rec resourcelock.LeaderElectionRecord, lastChange, now time.Time) bool {
	if rec.HolderIdentity == "" {
		return false
	}
	lease := time.Duration(rec.LeaseDurationSeconds) * time.Second
	if lease <= 0 {
		lease = 15 * time.Second // SuperEdge's default
	}
	return now.Sub(lastChange) < lease
}

// live returns the lock object held by a live predecessor and a description
// of it, or nil.
func (p *predecessorWatch) live(ctx context.Context) (runtime.Object, string, error) {
	type lockObj struct {
		kind string
		get  func() (runtime.Object, metav1.Object, error)
	}
	locks := []lockObj{
		{"Endpoints", func() (runtime.Object, metav1.Object, error) {
			o, err := p.kube.CoreV1().Endpoints(p.namespace).Get(ctx, p.name, metav1.GetOptions{}) //nolint:staticcheck // SuperEdge's lock kind
			return o, o, err
		}},
		{"ConfigMap", func() (runtime.Object, metav1.Object, error) {
			o, err := p.kube.CoreV1().ConfigMaps(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
			return o, o, err
		}},
	}
	if p.checkLease {
		locks = append(locks, lockObj{"Lease", func() (runtime.Object, metav1.Object, error) {
			o, err := p.kube.CoordinationV1().Leases(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
			if err != nil {
				return o, o, err
			}
			// Present the Lease's spec as the record the other kinds carry.
			rec := resourcelock.LeaseSpecToLeaderElectionRecord(&o.Spec)
			data, _ := json.Marshal(rec)
			o = o.DeepCopy()
			o.Annotations = map[string]string{superEdgeLeaderAnnotation: string(data)}
			return o, o, nil
		}})
	}
	now := p.clock.Now()
	for _, l := range locks {
		obj, m, err := l.get()
		if apierrors.IsNotFound(err) {
			delete(p.seen, l.kind)
			continue
		}
		if apierrors.IsForbidden(err) {
			// Without RBAC for the lock (see build/manifests/controller/rbac.yaml)
			// the check cannot be made; say so, do not wait forever.
			klog.FromContext(ctx).Info("Cannot check SuperEdge's leader lock", "kind", l.kind, "lock", p.namespace+"/"+p.name, "err", err)
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("read %s %s/%s: %w", l.kind, p.namespace, p.name, err)
		}
		raw := m.GetAnnotations()[superEdgeLeaderAnnotation]
		if raw == "" {
			continue
		}
		var rec resourcelock.LeaderElectionRecord
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			continue
		}
		last := rec.RenewTime.Time
		if prev, ok := p.seen[l.kind]; ok {
			last = prev.changed
			if prev.raw != raw {
				last = now
			}
		}
		p.seen[l.kind] = observedRecord{raw: raw, changed: last}
		if predecessorAlive(rec, last, now) {
			return obj, fmt.Sprintf("%s %s/%s is held by %q (renewed %s)", l.kind, p.namespace, p.name, rec.HolderIdentity, rec.RenewTime.UTC().Format(time.RFC3339)), nil
		}
	}
	return nil, "", nil
}

// wait returns once no live SuperEdge controller holds its
// lock, checking every interval; it logs and records a Warning Event on the
// lock object when it starts waiting.
func (p *predecessorWatch) wait(ctx context.Context, interval time.Duration, recorder record.EventRecorder) error {
	logger := klog.FromContext(ctx)
	said := false
	for {
		obj, desc, err := p.live(ctx)
		switch {
		case err != nil:
			logger.Error(err, "Checking for a running SuperEdge application-grid-controller")
		case obj == nil:
			if said {
				logger.Info("SuperEdge's application-grid-controller no longer holds its lock; starting")
			}
			return nil
		case !said:
			said = true
			msg := "Not reconciling while SuperEdge's application-grid-controller is running: its leader lock " + desc + "; stop it (see build/MIGRATION.md)"
			logger.Info(msg)
			recorder.Event(obj, corev1.EventTypeWarning, ReasonPredecessorActive, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// appears returns true, after a log line and a Warning Event on the lock
// object, as soon as a live SuperEdge controller holds its lock, checking
// every interval; false when ctx ends first. Errors reading the lock are
// logged and the check retried: they do not stop the workers.
func (p *predecessorWatch) appears(ctx context.Context, interval time.Duration, recorder record.EventRecorder) bool {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(interval):
		}
		obj, desc, err := p.live(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				logger.Error(err, "Checking for a running SuperEdge application-grid-controller")
			}
		case obj != nil:
			msg := "Stopped reconciling: SuperEdge's application-grid-controller is running again, its leader lock " + desc + "; stop it (see build/MIGRATION.md)"
			logger.Info(msg)
			recorder.Event(obj, corev1.EventTypeWarning, ReasonPredecessorActive, msg)
			return true
		}
	}
}
