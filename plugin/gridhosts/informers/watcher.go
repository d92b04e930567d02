package informers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridinformers "github.com/servicegroup/servicegroup/client/informers/externalversions"
	"github.com/servicegroup/servicegroup/internal/nodelabels"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// Label selectors that keep the caches small: an edge node holds only grid
// StatefulSets, StatefulSet pods (the StatefulSet controller labels every pod
// it makes with its own name; which of them belong to a grid is decided in
// the index through their controller, since SuperEdge puts no grid label on
// pods), and only EndpointSlices of headless Services (the EndpointSlice
// controller labels those service.kubernetes.io/headless).
var (
	gridObjectSelector    = superedgev1.LabelGridSelector
	statefulPodSelector   = appsv1.StatefulSetPodNameLabel
	headlessSliceSelector = discoveryv1.LabelServiceName + "," + corev1.IsHeadlessService
	// clients mode indexes every pod's IP; finished pods give theirs up.
	runningPodSelector = "status.phase!=Succeeded,status.phase!=Failed"
	// Services: every headless one (a grid Service may name its keys in a
	// topologyKeys annotation alone, which no selector reaches; headless
	// Services are few) and the others only with the grid key label (a
	// unified name's Service must carry it), so a change of an ordinary
	// Service, which the kubernetes plugin receives anyway, costs nothing.
	headlessServiceSelector = "spec.clusterIP=None"
	otherServiceSelector    = "spec.clusterIP!=None"
	gridServiceSelector     = superedgev1.LabelGridUniqKey
)

// StartupBound is the kubernetes plugin's default start-up wait: if grid
// names cannot be served by then, the log says why.
const StartupBound = 5 * time.Second

// Watcher runs the informers feeding one index.Index.
type Watcher struct {
	client  kubernetes.Interface
	kube    informers.SharedInformerFactory
	pods    informers.SharedInformerFactory
	sets    informers.SharedInformerFactory
	slices  informers.SharedInformerFactory
	grids   gridinformers.SharedInformerFactory
	sources sources

	headlessServices, gridServices informers.SharedInformerFactory
	// gridSource and serviceSource tell, before everything has synced,
	// whether a name can already be known not to be a grid name.
	gridSource    *source
	serviceSource *source
	cancel        context.CancelFunc
	stopped       chan struct{}
	logger        klog.Logger
	// onError, when set before Start, is told every list/watch error.
	onError func(context.Context, error)

	// nodeLabels, in node mode, replaces the Node informer: labels only,
	// from NodeLabelSummaries when the controller writes them.
	nodeLabels     *nodelabels.Source
	nodeLabelsDone chan struct{}
	// podSelection, in node mode, runs the pod informer instead of pods.
	podSelection     *podSelection
	podSelectionDone chan struct{}
	// gridCRD, in node mode, is whether the StatefulSetGrid CRD is served
	// (no grid is watched there: see watchGridCRD).
	gridCRD        *source
	gridCRDPresent func()
	gridCRDDone    chan struct{}
}

// protobufClient is a clientset for cfg speaking protobuf.
func protobufClient(cfg *rest.Config) (*kubernetes.Clientset, error) {
	kcfg := rest.CopyConfig(cfg)
	kcfg.ContentType = "application/vnd.kubernetes.protobuf"
	kcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(kcfg)
}

// New builds (but does not start) the informers feeding idx, an index of
// the same mode: node mode when node is set without clients. In clients
// mode the pod informer covers every running pod, for the source-IP index,
// and every Node is watched for its InternalIPs; in node mode only nodes'
// labels are followed (see newNodeLabelSource), and pods are selected by
// name, only those of node's nodeunit (see podSelection).
//
// Services and EndpointSlices are read through services when it is not
// nil: on an edge node the node wrapper's DNS view, the one cache and
// upstream the kubernetes plugin reads too, so a Service or endpoint change
// crosses the edge link once for the node.
func New(cfg, services *rest.Config, idx *index.Index, clients bool, node string) (*Watcher, error) {
	kc, err := protobufClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	sc := kc
	if services != nil {
		if sc, err = protobufClient(services); err != nil {
			return nil, fmt.Errorf("kubernetes client for Services and EndpointSlices: %w", err)
		}
	}
	gc, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("superedge client: %w", err)
	}
	tr := informers.WithTransform(index.Transform)
	podOpts := func(o *metav1.ListOptions) { o.LabelSelector = statefulPodSelector }
	if clients {
		podOpts = func(o *metav1.ListOptions) { o.FieldSelector = runningPodSelector }
	}
	// Node mode: w.sets holds the children without a nodeunit label only;
	// the pod selection watches this node's nodeunits' labelled ones.
	nodeMode := !clients && node != ""
	if idx.NodeMode() != nodeMode {
		return nil, fmt.Errorf("an index in node mode %v for informers in node mode %v", idx.NodeMode(), nodeMode)
	}
	setSelector := gridObjectSelector
	if nodeMode {
		setSelector = unlabelledChildSelector
	}
	w := &Watcher{
		client: kc,
		kube:   informers.NewSharedInformerFactoryWithOptions(kc, 0, tr),
		pods:   informers.NewSharedInformerFactoryWithOptions(kc, 0, tr, informers.WithTweakListOptions(podOpts)),
		sets: informers.NewSharedInformerFactoryWithOptions(kc, 0, tr, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = setSelector
		})),
		slices: informers.NewSharedInformerFactoryWithOptions(sc, 0, tr, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = headlessSliceSelector
		})),
		grids: gridinformers.NewSharedInformerFactoryWithOptions(gc, 0, gridinformers.WithTransform(index.Transform)),
		headlessServices: informers.NewSharedInformerFactoryWithOptions(sc, 0, tr, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = headlessServiceSelector
		})),
		gridServices: informers.NewSharedInformerFactoryWithOptions(sc, 0, tr, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector, o.LabelSelector = otherServiceSelector, gridServiceSelector
		})),
	}
	h := eventHandler(idx)
	var headless *source
	type informerOf struct {
		resource string
		inf      cache.SharedIndexInformer
		optional bool
		keep     **source
	}
	setsInformer := w.sets.Apps().V1().StatefulSets().Informer()
	informersOf := []informerOf{
		{"services", w.gridServices.Core().V1().Services().Informer(), false, &w.serviceSource},
		{"services (headless)", w.headlessServices.Core().V1().Services().Informer(), false, &headless},
		{"endpointslices.discovery.k8s.io", w.slices.Discovery().V1().EndpointSlices().Informer(), false, nil},
	}
	sink := indexSink{idx: idx}
	if !nodeMode {
		informersOf = append(informersOf,
			informerOf{"statefulsetgrids.superedge.io", w.grids.Superedge().V1().StatefulSetGrids().Informer(), true, &w.gridSource},
			informerOf{"statefulsets.apps", setsInformer, false, nil},
			informerOf{"pods", w.pods.Core().V1().Pods().Informer(), false, nil})
	} else {
		// ready is read only once the watcher runs, after setsReg is set.
		var setsReg cache.ResourceEventHandlerRegistration
		w.podSelection = newPodSelection(kc, idx, func() bool {
			return setsReg.HasSynced() && w.nodeLabels.HasSynced()
		})
		if setsReg, err = setsInformer.AddEventHandler(w.podSelection.children.unlabelledHandler()); err != nil {
			return nil, err
		}
		// The labelled children's watch syncs with the first selection.
		sets := w.addSource("statefulsets.apps", func() bool { return setsReg.HasSynced() && w.podSelection.HasSynced() }, false)
		if err := setsInformer.SetWatchErrorHandlerWithContext(sets.onError); err != nil {
			return nil, err
		}
		w.podSelection.onChildError = sets.onError
		// No StatefulSetGrid is watched: its status, which the controller
		// rewrites with every child's state anywhere, is no answer's
		// concern; grids are read from their children (the index's node
		// mode), so a name is known not to be a grid's once the children
		// are.
		w.gridSource = sets
		var crd atomic.Bool
		w.gridCRD = w.addSource("statefulsetgrids.superedge.io", crd.Load, true)
		w.gridCRDPresent = func() { crd.Store(true) }
		w.podSelection.onError = w.addSource("pods", w.podSelection.HasSynced, false).onError
		sink.self, sink.sel = node, w.podSelection
	}
	if clients {
		informersOf = append(informersOf, informerOf{"nodes", w.kube.Core().V1().Nodes().Informer(), false, nil})
	} else {
		if w.nodeLabels, err = newNodeLabelSource(cfg, kc, gc, sink); err != nil {
			return nil, err
		}
		src := w.addSource("nodes", w.nodeLabels.HasSynced, false)
		w.nodeLabels.WatchErrors = func(inf cache.SharedIndexInformer) error {
			return inf.SetWatchErrorHandlerWithContext(src.onError)
		}
	}
	for _, in := range informersOf {
		reg, err := in.inf.AddEventHandler(h)
		if err != nil {
			return nil, err
		}
		src := w.addSource(in.resource, reg.HasSynced, in.optional)
		if err := in.inf.SetWatchErrorHandlerWithContext(src.onError); err != nil {
			return nil, err
		}
		if in.keep != nil {
			*in.keep = src
		}
	}
	grid := w.serviceSource
	w.serviceSource = &source{resource: "services", synced: func() bool { return grid.synced() && headless.synced() }, announced: &atomic.Bool{}}
	return w, nil
}

// addSource adds one resource's source to w.sources: its list/watch errors
// are logged once and told to onError, when that is set.
func (w *Watcher) addSource(resource string, synced func() bool, optional bool) *source {
	src := &source{resource: resource, synced: synced, optional: optional, announced: &atomic.Bool{},
		also: func(ctx context.Context, err error) {
			if w.onError != nil {
				w.onError(ctx, err)
			}
		}}
	w.sources = append(w.sources, src)
	return src
}

// OnError has f told every list/watch error from Start on.
func (w *Watcher) OnError(f func(context.Context, error)) { w.onError = f }

// Start runs the informers until Stop, without waiting for them: start-up
// must not add to the kubernetes plugin's own wait. onKnown is called once
// every source is known (synced, or the CRD absent). They log to logger.
func (w *Watcher) Start(logger klog.Logger, onKnown func()) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	w.cancel, w.logger = cancel, logger
	w.stopped = make(chan struct{})
	for _, f := range []interface{ Start(<-chan struct{}) }{w.kube, w.pods, w.sets, w.slices, w.grids, w.headlessServices, w.gridServices} {
		f.Start(ctx.Done())
	}
	if w.nodeLabels != nil {
		w.nodeLabelsDone = make(chan struct{})
		go func() {
			defer close(w.nodeLabelsDone)
			w.nodeLabels.Run(ctx)
		}()
	}
	if w.gridCRD != nil {
		w.gridCRDDone = make(chan struct{})
		go func() {
			defer close(w.gridCRDDone)
			watchGridCRD(ctx, w.client.Discovery(), w.gridCRD, w.gridCRDPresent)
		}()
	}
	if w.podSelection != nil {
		w.podSelectionDone = make(chan struct{})
		go func() {
			defer close(w.podSelectionDone)
			w.podSelection.run(ctx)
		}()
	}
	go func() {
		defer close(w.stopped)
		if w.sources.waitKnown(ctx, StartupBound) {
			onKnown()
		}
		<-ctx.Done()
		for _, f := range []interface{ Shutdown() }{w.kube, w.pods, w.sets, w.slices, w.grids, w.headlessServices, w.gridServices} {
			f.Shutdown()
		}
		if w.nodeLabelsDone != nil {
			<-w.nodeLabelsDone
		}
		if w.podSelectionDone != nil {
			<-w.podSelectionDone
		}
		if w.gridCRDDone != nil {
			<-w.gridCRDDone
		}
	}()
}

// WaitStartup holds CoreDNS start-up (and every reload) until the
// informers are known, so a reloaded instance answers grid names at once,
// but only while that can succeed soon: it returns as soon as a source
// reports an error or the apiserver does not answer a short probe
// (refused connections never reach the error handlers), so an unreachable
// apiserver costs well under the kubernetes plugin's own wait.
func (w *Watcher) WaitStartup(bound time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	unreachable := make(chan struct{})
	go func() {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		if err := w.Probe(pctx); err != nil && ctx.Err() == nil {
			close(unreachable)
		}
	}()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !w.sources.known() && !w.sources.failing() {
		select {
		case <-ctx.Done():
			return
		case <-unreachable:
			return
		case <-t.C:
		}
	}
}

// Known reports whether every source is known: synced, or for the
// StatefulSetGrid CRD, not installed.
func (w *Watcher) Known() bool { return w.sources.known() }

// GridsKnown and ServicesKnown tell, before everything is known, whether a
// name can already be ruled out as a grid name: its grid known not to
// exist, or its Service no grid Service.
func (w *Watcher) GridsKnown() bool    { return w.gridSource.known() }
func (w *Watcher) ServicesKnown() bool { return w.serviceSource.known() }

// Client is the clientset the informers use.
func (w *Watcher) Client() kubernetes.Interface { return w.client }

// Probe asks the apiserver for its version: whether it answers now.
func (w *Watcher) Probe(ctx context.Context) error {
	_, err := w.client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	return err
}

// Stop ends the informers and waits for their goroutines.
func (w *Watcher) Stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	select {
	case <-w.stopped:
	case <-time.After(10 * time.Second):
		w.logger.Info("Informers did not stop within 10s")
	}
}
