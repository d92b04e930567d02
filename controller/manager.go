package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridscheme "github.com/servicegroup/servicegroup/client/clientset/versioned/scheme"
	gridinformers "github.com/servicegroup/servicegroup/client/informers/externalversions"
	"github.com/servicegroup/servicegroup/internal/controllerlease"
	"github.com/servicegroup/servicegroup/internal/version"
	"github.com/servicegroup/servicegroup/metricscert"
)

// Options configure the controller process.
type Options struct {
	// Config reaches the apiserver (QPS and Burst as the caller set them).
	Config *rest.Config
	// Workers per grid kind.
	Workers int
	// Resync is the informers' resync period: how often every grid is re-checked.
	Resync time.Duration

	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionName      string
	// LeaderElectionIdentity defaults to hostname_uuid.
	LeaderElectionIdentity string
	LeaseDuration          time.Duration
	RenewDeadline          time.Duration
	RetryPeriod            time.Duration

	// ManageCRDs applies the embedded CRDs at start and every CRDCheckInterval if they drifted.
	ManageCRDs       bool
	CRDCheckInterval time.Duration

	// DeletionGracePeriod: a nodeunit's child is deleted only after the
	// nodeunit has had no nodes this long (0: at once).
	DeletionGracePeriod time.Duration

	// SuperEdgeLock is "namespace/name" of SuperEdge's controller's leader
	// lock (Endpoints or ConfigMap); while a live leader holds it, this
	// controller does nothing. "" skips the check.
	SuperEdgeLock string

	// RequireNodeRestrictedGridKeys accepts only grid keys under
	// node-restriction.kubernetes.io/ (gridkeytrust.go).
	RequireNodeRestrictedGridKeys bool

	// ZoneFromGridKey: the grid key whose node values become the nodes'
	// topology.kubernetes.io/zone, the one key native-mode ServiceGrids may
	// use ("": none written, those the controller wrote are removed).
	ZoneFromGridKey string

	// LabelSummaryDelay: the NodeLabelSummary writer writes a change this
	// long after it, together with every change meanwhile (0: at once).
	LabelSummaryDelay time.Duration

	// GridStatusDelay: a grid status change that no sync decides from is
	// written this long after the first such change, together with every
	// change meanwhile (0: at once).
	GridStatusDelay time.Duration

	// MetricsBindAddress serves /metrics, HealthBindAddress /healthz and
	// /readyz; equal addresses share one listener; "0" turns one off.
	MetricsBindAddress string
	HealthBindAddress  string

	// MetricsServingSigner, when set, approves and signs the wrappers'
	// secure-metrics serving certificates while leading (package metricscert).
	MetricsServingSigner *metricscert.Options
}

// DefaultOptions are the defaults of the binary's flags.
func DefaultOptions() Options {
	return Options{
		Workers:                 5,
		Resync:                  10 * time.Minute,
		LeaderElect:             controllerlease.DefaultLeaderElect,
		LeaderElectionNamespace: controllerlease.DefaultNamespace,
		LeaderElectionName:      controllerlease.DefaultName,
		LeaseDuration:           15 * time.Second,
		RenewDeadline:           10 * time.Second,
		RetryPeriod:             2 * time.Second,
		ManageCRDs:              true,
		CRDCheckInterval:        time.Minute,
		DeletionGracePeriod:     DefaultDeletionGracePeriod,
		LabelSummaryDelay:       DefaultLabelSummaryDelay,
		GridStatusDelay:         DefaultGridStatusDelay,
		SuperEdgeLock:           "kube-system/application-grid-controller",
		MetricsBindAddress:      ":8080",
		HealthBindAddress:       ":8081",
	}
}

// Manager is one controller process: HTTP endpoints, leader election, and
// (while leading) CRDs, informers and the three controllers.
type Manager struct {
	opts      Options
	kube      kubernetes.Interface
	grids     versioned.Interface
	ext       apiextensionsclient.Interface
	listeners map[string]net.Listener // "metrics", "health"
	watchdog  *leaderelection.HealthzAdaptor
	leading   atomic.Bool
	synced    atomic.Bool
	// paused: leading, but not reconciling while SuperEdge's controller runs.
	paused atomic.Bool
	// workHook replaces the controllers' work (tests of the lifecycle).
	workHook func(ctx context.Context) error
}

// NewManager builds clients and binds the HTTP listeners (so their
// addresses are known before Run).
func NewManager(opts Options) (*Manager, error) {
	if opts.Config == nil {
		return nil, errors.New("no apiserver configuration")
	}
	if opts.Workers < 1 {
		return nil, fmt.Errorf("workers must be at least 1, got %d", opts.Workers)
	}
	if opts.SuperEdgeLock != "" {
		if _, _, err := ParseSuperEdgeLock(opts.SuperEdgeLock); err != nil {
			return nil, fmt.Errorf("SuperEdge lock %q: %w", opts.SuperEdgeLock, err)
		}
	}
	m := &Manager{opts: opts, listeners: map[string]net.Listener{}, watchdog: leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)}
	var err error
	if m.kube, err = kubernetes.NewForConfig(opts.Config); err != nil {
		return nil, err
	}
	if m.grids, err = versioned.NewForConfig(opts.Config); err != nil {
		return nil, err
	}
	if m.ext, err = apiextensionsclient.NewForConfig(opts.Config); err != nil {
		return nil, err
	}
	for name, addr := range map[string]string{"metrics": opts.MetricsBindAddress, "health": opts.HealthBindAddress} {
		if addr == "" || addr == "0" {
			continue
		}
		if name == "health" && addr == opts.MetricsBindAddress {
			continue // shares the metrics listener
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			m.closeListeners()
			return nil, fmt.Errorf("listen %s on %s: %w", name, addr, err)
		}
		m.listeners[name] = l
	}
	return m, nil
}

// Addr is where the "metrics" or "health" endpoints listen ("" if off).
func (m *Manager) Addr(name string) string {
	if name == "health" && m.opts.HealthBindAddress == m.opts.MetricsBindAddress {
		name = "metrics"
	}
	if l, ok := m.listeners[name]; ok {
		return l.Addr().String()
	}
	return ""
}

// Leading tells whether this process leads (always, without leader
// election, once Run started).
func (m *Manager) Leading() bool { return m.leading.Load() }

func (m *Manager) closeListeners() {
	for _, l := range m.listeners {
		_ = l.Close()
	}
}

func (m *Manager) handler(name string) http.Handler {
	mux := http.NewServeMux()
	if name == "metrics" {
		mux.Handle("/metrics", promhttp.HandlerFor(Registry(), promhttp.HandlerOpts{}))
	}
	if name == "health" || m.opts.HealthBindAddress == m.opts.MetricsBindAddress {
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			if err := m.watchdog.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			switch {
			case m.opts.LeaderElect && !m.leading.Load():
				_, _ = w.Write([]byte("ok: standby, waiting for leadership"))
			case m.paused.Load():
				_, _ = w.Write([]byte("ok: not reconciling while SuperEdge's application-grid-controller holds its leader lock"))
			case m.synced.Load():
				_, _ = w.Write([]byte("ok"))
			default:
				http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			}
		})
	}
	return mux
}

// Run serves the endpoints and runs the controllers (under leader election
// when enabled) until ctx ends. Losing the lease is an error: the process
// should exit and start over as a candidate.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var servers sync.WaitGroup
	defer servers.Wait() // runs last: after every server was shut down below
	for name, l := range m.listeners {
		srv := &http.Server{Handler: m.handler(name), ReadHeaderTimeout: 10 * time.Second}
		servers.Go(func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Serving", "endpoint", name)
			}
		})
		defer func() {
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
		}()
	}

	if !m.opts.LeaderElect {
		m.leading.Store(true)
		return m.lead(ctx, nil)
	}

	id := m.opts.LeaderElectionIdentity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + uuid.NewString()
	}
	// The leader publishes its release and its CRDs' schemas on the Lease,
	// for kubectl grid doctor to compare the cluster's CRDs with.
	fingerprints, err := crds.Fingerprints()
	if err != nil {
		return err
	}
	broadcaster, recorder := m.newRecorder(ctx)
	defer broadcaster.Shutdown()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: m.opts.LeaderElectionNamespace, Name: m.opts.LeaderElectionName},
		Client:     m.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder},
		Labels:     controllerlease.Labels(version.Version, fingerprints),
	}
	var leadErr error
	started, done := make(chan struct{}), make(chan struct{})
	// The elector gets a context of its own: with ReleaseOnCancel it gives up
	// the Lease the moment that context ends, so it ends only once the
	// workers have returned (or before they ever started); otherwise the next
	// leader would start while this one still writes.
	leCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var stateMu sync.Mutex
	leadingStarted, stopping := false, false
	stopWatching := context.AfterFunc(ctx, func() {
		stateMu.Lock()
		defer stateMu.Unlock()
		stopping = true
		if !leadingStarted {
			stopElection()
		}
	})
	defer stopWatching()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   m.opts.LeaseDuration,
		RenewDeadline:   m.opts.RenewDeadline,
		RetryPeriod:     m.opts.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        m.watchdog,
		Name:            m.opts.LeaderElectionName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				stateMu.Lock()
				if stopping {
					stateMu.Unlock()
					return // the election is already being stopped
				}
				leadingStarted = true
				stateMu.Unlock()
				close(started)
				defer close(done)
				// A leader whose work ended (or failed) must not keep
				// renewing the lease idly; this releases it.
				defer stopElection()
				// Work ends when leadership is lost or the process stops.
				workCtx, stopWork := context.WithCancel(leaderCtx)
				defer stopWork()
				defer context.AfterFunc(ctx, stopWork)()
				logger.Info("Started leading", "identity", id)
				m.leading.Store(true)
				leadErr = m.lead(workCtx, recorder)
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading", "identity", id) },
		},
	})
	if err != nil {
		return err
	}
	le.Run(leCtx)
	select {
	case <-started:
		<-done // let the workers finish before returning
	default:
	}
	if leadErr != nil {
		return leadErr
	}
	if ctx.Err() == nil {
		return errors.New("leader election lost")
	}
	return nil
}

func (m *Manager) newRecorder(ctx context.Context) (record.EventBroadcaster, record.EventRecorder) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(gridscheme.AddToScheme(scheme))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.kube.CoreV1().Events("")})
	return broadcaster, broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "application-grid-controller"})
}

// lead does the leader's work: CRDs, informers, controllers; never while
// SuperEdge's controller leads, also when it appears later.
func (m *Manager) lead(ctx context.Context, recorder record.EventRecorder) error {
	if recorder == nil {
		broadcaster, r := m.newRecorder(ctx)
		defer broadcaster.Shutdown()
		recorder = r
	}
	if m.opts.SuperEdgeLock == "" {
		return m.work(ctx, recorder)
	}
	ns, name, err := ParseSuperEdgeLock(m.opts.SuperEdgeLock)
	if err != nil {
		return fmt.Errorf("SuperEdge lock %q: %w", m.opts.SuperEdgeLock, err)
	}
	ownLease := m.opts.LeaderElect && ns == m.opts.LeaderElectionNamespace && name == m.opts.LeaderElectionName
	w := &predecessorWatch{kube: m.kube, namespace: ns, name: name, clock: clock.RealClock{}, seen: map[string]observedRecord{}, checkLease: !ownLease}
	for {
		m.paused.Store(true)
		if err := w.wait(ctx, m.opts.RetryPeriod, recorder); err != nil {
			return nil //nolint:nilerr // ctx ended while waiting: a normal stop
		}
		m.paused.Store(false)
		// While leading, SuperEdge's controller may be started again (a
		// rollback, a forgotten replica): the workers stop until it is gone.
		workCtx, stopWork := context.WithCancel(ctx)
		var watching sync.WaitGroup
		watching.Go(func() {
			if w.appears(workCtx, m.opts.RetryPeriod, recorder) {
				stopWork()
			}
		})
		err := m.work(workCtx, recorder)
		stopWork()
		watching.Wait()
		if err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// work runs CRDs, informers and the controllers until ctx ends.
func (m *Manager) work(ctx context.Context, recorder record.EventRecorder) error {
	if m.workHook != nil {
		return m.workHook(ctx)
	}
	logger := klog.FromContext(ctx)
	defer m.synced.Store(false)
	var wg sync.WaitGroup
	defer wg.Wait()
	if m.opts.ManageCRDs {
		if err := EnsureCRDs(ctx, m.ext); err != nil {
			return fmt.Errorf("install CRDs: %w", err)
		}
		logger.Info("CRDs applied and Established")
		wg.Go(func() { keepCRDs(ctx, m.ext, m.opts.CRDCheckInterval) })
	}

	if o := m.opts.MetricsServingSigner; o != nil {
		wg.Go(func() {
			if err := metricscert.New(*o, m.kube).Run(ctx); err != nil {
				logger.Error(err, "Metrics serving signer stopped")
			}
		})
	}
	kubeInformers := informers.NewSharedInformerFactoryWithOptions(m.kube, m.opts.Resync, informers.WithTransform(Transform))
	gridInformers := gridinformers.NewSharedInformerFactoryWithOptions(m.grids, m.opts.Resync, gridinformers.WithTransform(TransformGrids))
	ctrls, err := NewControllers(Deps{
		Kube: m.kube, Grids: m.grids,
		KubeInformers: kubeInformers, GridInformers: gridInformers,
		Recorder: recorder, DeletionGracePeriod: m.opts.DeletionGracePeriod,
		RequireNodeRestrictedGridKeys: m.opts.RequireNodeRestrictedGridKeys,
		ZoneFromGridKey:               m.opts.ZoneFromGridKey,
		LabelSummaryDelay:             m.opts.LabelSummaryDelay,
		GridStatusDelay:               m.opts.GridStatusDelay,
	})
	if err != nil {
		return err
	}
	kubeInformers.Start(ctx.Done())
	gridInformers.Start(ctx.Done())
	defer kubeInformers.Shutdown()
	defer gridInformers.Shutdown()
	wg.Go(func() {
		ok := true
		for _, synced := range kubeInformers.WaitForCacheSync(ctx.Done()) {
			ok = ok && synced
		}
		for _, synced := range gridInformers.WaitForCacheSync(ctx.Done()) {
			ok = ok && synced
		}
		m.synced.Store(ok)
	})
	ctrls.Run(ctx, m.opts.Workers)
	return nil
}
