package controller

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/trafficmode"
)

// ZoneFieldManager owns the zone labels (and their record) the controller
// writes on Nodes: a field manager of their own, so that what it wrote is
// exactly what this manager owns, apart from the children's.
const ZoneFieldManager = "application-grid-controller-zone"

// zoneLabelWriter keeps topology.kubernetes.io/zone equal to each node's
// value of --zone-from-grid-key, for native-mode ServiceGrids. It writes
// with server-side apply, never forced: a zone label someone else owns
// (the kubelet's or a cloud provider's) makes the apply conflict instead of
// being overwritten, and an apply that no longer names the label removes it
// only where this manager is still its sole owner. With the flag empty it
// only releases what it wrote. The rule per node is trafficmode.DecideZone.
type zoneLabelWriter struct {
	kube     kubernetes.Interface
	nodes    cache.SharedIndexInformer
	source   string
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// warned is the conflict last reported per node, so a resync does not
	// repeat the Event.
	warned map[string]string
}

func newZoneLabelWriter(deps Deps) (*zoneLabelWriter, error) {
	w := &zoneLabelWriter{
		kube:     deps.Kube,
		nodes:    deps.KubeInformers.Core().V1().Nodes().Informer(),
		source:   deps.ZoneFromGridKey,
		recorder: deps.Recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "zonelabel", MetricsProvider: deps.MetricsProvider}),
		warned: map[string]string{},
	}
	relevant := func(obj any) (labels, annotations map[string]string) {
		m, ok := objectOf(obj)
		if !ok {
			return nil, nil
		}
		return m.GetLabels(), m.GetAnnotations()
	}
	if _, err := w.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.enqueue(obj) },
		UpdateFunc: func(old, cur any) {
			ol, oa := relevant(old)
			cl, ca := relevant(cur)
			if ol[w.source] != cl[w.source] || ol[trafficmode.ZoneLabel] != cl[trafficmode.ZoneLabel] ||
				!maps.Equal(oa, ca) {
				w.enqueue(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if m, ok := objectOf(obj); ok {
				w.mu.Lock()
				delete(w.warned, m.GetName())
				w.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("zone label handler: %w", err)
	}
	return w, nil
}

func (w *zoneLabelWriter) enqueue(obj any) {
	if m, ok := objectOf(obj); ok {
		w.queue.Add(m.GetName())
	}
}

// run writes zone labels with workers workers until ctx ends.
func (w *zoneLabelWriter) run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", "zonelabel")
	ctx = klog.NewContext(ctx, logger)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer w.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, w.nodes.HasSynced) {
		return
	}
	logger.Info("Starting zone label writer", "zoneFromGridKey", w.source)
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for w.processNext(ctx) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
}

func (w *zoneLabelWriter) processNext(ctx context.Context) bool {
	name, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(name)
	if err := w.sync(ctx, name); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Writing the zone label", "node", name)
		w.queue.AddRateLimited(name)
		return true
	}
	w.queue.Forget(name)
	return true
}

// sync applies DecideZone's choice to one node.
func (w *zoneLabelWriter) sync(ctx context.Context, name string) error {
	obj, exists, err := w.nodes.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	action, value := trafficmode.DecideZone(node.Labels, node.Annotations, w.source)
	switch action {
	case trafficmode.ZoneWrite:
		cfg := corev1apply.Node(name).WithUID(node.UID).
			WithLabels(map[string]string{trafficmode.ZoneLabel: value}).
			WithAnnotations(map[string]string{trafficmode.ZoneWrittenAnnotation: value})
		err := w.apply(ctx, cfg)
		if apierrors.IsConflict(err) {
			// Someone else also owns the label (an equal value set beside ours).
			w.conflict(ctx, node, value, err.Error())
			return nil
		}
		if err == nil {
			w.clearWarning(name)
			klog.FromContext(ctx).V(2).Info("Zone label written", "node", name, "zone", value, "from", w.source)
		}
		return err
	case trafficmode.ZoneRelease:
		if err := w.apply(ctx, corev1apply.Node(name).WithUID(node.UID)); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Zone label released", "node", name)
		return nil
	case trafficmode.ZoneConflict:
		w.conflict(ctx, node, value, fmt.Sprintf("its %s is %q", trafficmode.ZoneLabel, node.Labels[trafficmode.ZoneLabel]))
		if _, recorded := node.Annotations[trafficmode.ZoneWrittenAnnotation]; recorded {
			// Our record of a label someone has since changed goes.
			return w.apply(ctx, corev1apply.Node(name).WithUID(node.UID))
		}
		return nil
	}
	return nil
}

func (w *zoneLabelWriter) apply(ctx context.Context, cfg *corev1apply.NodeApplyConfiguration) error {
	_, err := w.kube.CoreV1().Nodes().Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: ZoneFieldManager, Force: false})
	if err != nil && (apierrors.IsNotFound(err) || !nodeExists(w.nodes, *cfg.Name)) {
		return nil // the node went away meanwhile (its UID keeps the apply from creating one)
	}
	return err
}

func nodeExists(inf cache.SharedIndexInformer, name string) bool {
	_, ok, _ := inf.GetIndexer().GetByKey(name)
	return ok
}

// conflict reports, once per distinct situation, a zone label the writer
// leaves alone because it is someone else's.
func (w *zoneLabelWriter) conflict(ctx context.Context, node *corev1.Node, want, why string) {
	msg := fmt.Sprintf("%s not set to %q (the node's %s): %s, not written by %s, so it is left as it is; native-mode ServiceGrids route this node's traffic by that zone, not by its nodeunit. Remove the label (kubectl label node %s %s-) to have it written, or stop whatever sets it",
		trafficmode.ZoneLabel, want, w.source, why, ZoneFieldManager, node.Name, trafficmode.ZoneLabel)
	w.mu.Lock()
	same := w.warned[node.Name] == msg
	w.warned[node.Name] = msg
	w.mu.Unlock()
	if same {
		return
	}
	klog.FromContext(ctx).Info("Zone label left to its owner", "node", node.Name, "want", want, "reason", why)
	w.recorder.Event(&corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID}},
		corev1.EventTypeWarning, ReasonZoneLabelNotOurs, msg)
}

func (w *zoneLabelWriter) clearWarning(name string) {
	w.mu.Lock()
	delete(w.warned, name)
	w.mu.Unlock()
}
