package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridinformersv1 "github.com/servicegroup/servicegroup/client/informers/externalversions/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/topology"
)

// labelSummaryPrefix names the NodeLabelSummaries: nodes-0, nodes-1, ...
const labelSummaryPrefix = "nodes-"

// labelSummaryKey is the one key of the summary writer's queue: every
// change recomputes all buckets, and writes only those that differ.
const labelSummaryKey = "all"

// DefaultLabelSummaryDelay is how long the summary writer waits after a
// change before it writes: the changes arriving meanwhile (a relabel of many
// nodes, one patch each) join that write, so a bucket is written once per
// delay during a burst rather than once per sync.
const DefaultLabelSummaryDelay = 500 * time.Millisecond

// labelSummaryWriter keeps the NodeLabelSummaries: every node's values of
// the label keys that topologyKeys annotations and grids use, in buckets of
// at most MaxNodesPerLabelSummary nodes. A node stays in its bucket for its
// life, so a new or deleted node or a changed value rewrites one bucket;
// status reports and other labels write nothing. Empty buckets are kept
// and refilled, never deleted: wrappers treat a deleted bucket as someone
// else's doing and keep its nodes' last labels.
type labelSummaryWriter struct {
	grids     versioned.Interface
	nodes     cache.SharedIndexInformer
	services  cache.SharedIndexInformer
	gridInfs  []cache.SharedIndexInformer
	summaries cache.SharedIndexInformer
	// written overlays the summaries this writer wrote on the informer's
	// cache until the informer has them, so the next sync does not update
	// from a stale resourceVersion (a conflict and a retry).
	written cache.MutationCache
	queue   workqueue.TypedRateLimitingInterface[string]
	// delay: Deps.LabelSummaryDelay.
	delay time.Duration
}

func newLabelSummaryWriter(deps Deps) (*labelSummaryWriter, error) {
	w := &labelSummaryWriter{
		grids:    deps.Grids,
		nodes:    deps.KubeInformers.Core().V1().Nodes().Informer(),
		services: deps.KubeInformers.Core().V1().Services().Informer(),
		gridInfs: []cache.SharedIndexInformer{
			deps.GridInformers.Superedge().V1().DeploymentGrids().Informer(),
			deps.GridInformers.Superedge().V1().StatefulSetGrids().Informer(),
			deps.GridInformers.Superedge().V1().ServiceGrids().Informer(),
		},
		// Its own informer, started by run: a cluster without the CRD yet
		// (--manage-crds=false) must not hold up the grid controllers' sync.
		summaries: gridinformersv1.NewNodeLabelSummaryInformer(deps.Grids, 0, cache.Indexers{}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodelabelsummary", MetricsProvider: deps.MetricsProvider}),
		delay: deps.LabelSummaryDelay,
	}
	w.written = cache.NewIntegerResourceVersionMutationCache(klog.Background(), w.summaries.GetStore(), nil, time.Minute, true)
	// The queue keeps a waiting key's earliest time, so every change until
	// the sync starts joins it; a change once it has read the informers
	// queues the next (the queue holds a key being processed as dirty).
	enqueue := func() { w.queue.AddAfter(labelSummaryKey, w.delay) }
	handlers := []struct {
		inf     cache.SharedIndexInformer
		changed func(old, cur any) bool
	}{
		{w.nodes, func(old, cur any) bool {
			return !maps.Equal(labelsOf(old), labelsOf(cur))
		}},
		{w.services, func(old, cur any) bool {
			return annotation(old, superedgev1.AnnotationTopologyKeys) != annotation(cur, superedgev1.AnnotationTopologyKeys) ||
				serviceGridKey(old) != serviceGridKey(cur)
		}},
		{w.summaries, func(_, _ any) bool { return true }},
	}
	for _, g := range w.gridInfs {
		handlers = append(handlers, struct {
			inf     cache.SharedIndexInformer
			changed func(old, cur any) bool
		}{g, func(old, cur any) bool { return gridKeyOf(old) != gridKeyOf(cur) }})
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { enqueue() },
			UpdateFunc: func(old, cur any) {
				if h.changed(old, cur) {
					enqueue()
				}
			},
			DeleteFunc: func(any) { enqueue() },
		}); err != nil {
			return nil, fmt.Errorf("node label summary handler: %w", err)
		}
	}
	return w, nil
}

func labelsOf(obj any) map[string]string {
	if m, ok := objectOf(obj); ok {
		return m.GetLabels()
	}
	return nil
}

func annotation(obj any, key string) string {
	if m, ok := objectOf(obj); ok {
		return m.GetAnnotations()[key]
	}
	return ""
}

func gridKeyOf(obj any) string {
	switch g := obj.(type) {
	case *superedgev1.DeploymentGrid:
		return g.Spec.GridUniqKey
	case *superedgev1.StatefulSetGrid:
		return g.Spec.GridUniqKey
	case *superedgev1.ServiceGrid:
		return g.Spec.GridUniqKey
	}
	return ""
}

// run writes summaries until ctx ends. The kube and grid informers are
// started by the caller; the summaries' own informer here.
func (w *labelSummaryWriter) run(ctx context.Context, _ int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer w.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", "nodelabelsummary")
	ctx = klog.NewContext(ctx, logger)
	go w.summaries.RunWithContext(ctx)
	synced := []cache.InformerSynced{w.nodes.HasSynced, w.services.HasSynced, w.summaries.HasSynced}
	for _, g := range w.gridInfs {
		synced = append(synced, g.HasSynced)
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return
	}
	w.queue.Add(labelSummaryKey)
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for w.processNext(ctx) {
		}
	}, time.Second)
}

func (w *labelSummaryWriter) processNext(ctx context.Context) bool {
	k, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(k)
	if err := w.sync(ctx); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Writing NodeLabelSummaries")
		w.queue.AddRateLimited(k)
		return true
	}
	w.queue.Forget(k)
	return true
}

// serviceGridKey is the grid key a Service names itself (label or
// annotation): gridhosts keeps a headless one in its nodeunit by that key
// even when no grid uses it.
func serviceGridKey(obj any) string {
	m, ok := objectOf(obj)
	if !ok {
		return ""
	}
	k, _ := gridname.GridKeyRefOf(m.GetLabels(), m.GetAnnotations()).Key()
	return k
}

// summarisedKeys are the label keys topology decides on: every key of a
// valid topologyKeys annotation, every grid's gridUniqKey and every grid key
// a Service names.
func (w *labelSummaryWriter) summarisedKeys() sets.Set[string] {
	keys := sets.New[string]()
	for _, obj := range w.services.GetStore().List() {
		if k := serviceGridKey(obj); k != "" {
			keys.Insert(k)
		}
		if v := annotation(obj, superedgev1.AnnotationTopologyKeys); v != "" {
			parsed, err := topology.ParseKeys(v)
			if err != nil {
				continue
			}
			for _, k := range parsed {
				if k != topology.AnyKey {
					keys.Insert(k)
				}
			}
		}
	}
	for _, g := range w.gridInfs {
		for _, obj := range g.GetStore().List() {
			if k := gridKeyOf(obj); k != "" {
				keys.Insert(k)
			}
		}
	}
	return keys
}

// sync computes every bucket and writes those that differ.
func (w *labelSummaryWriter) sync(ctx context.Context) error {
	keys := w.summarisedKeys()
	sortedKeys := sets.List(keys)
	wanted := map[string]map[string]string{} // node -> summarised labels
	for _, obj := range w.nodes.GetStore().List() {
		n, ok := obj.(*corev1.Node)
		if !ok {
			continue
		}
		var l map[string]string
		for k, v := range n.Labels {
			if keys.Has(k) {
				if l == nil {
					l = map[string]string{}
				}
				l[k] = v
			}
		}
		wanted[n.Name] = l
	}
	current := map[string]*superedgev1.NodeLabelSummary{}
	for _, key := range w.summaries.GetStore().ListKeys() {
		if obj, ok, _ := w.written.GetByKey(key); ok {
			if s, ok := obj.(*superedgev1.NodeLabelSummary); ok {
				current[s.Name] = s
			}
		}
	}
	members := assignBuckets(current, wanted)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(members)) {
		want := &superedgev1.NodeLabelSummary{ObjectMeta: metav1.ObjectMeta{Name: name}, Keys: sortedKeys}
		for _, node := range members[name] {
			want.Nodes = append(want.Nodes, superedgev1.NodeLabels{Name: node, Labels: wanted[node]})
		}
		cur, exists := current[name]
		switch {
		case !exists:
			created, err := w.grids.SuperedgeV1().NodeLabelSummaries().Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
			switch {
			case err == nil:
				w.written.Mutation(created)
			case !apierrors.IsAlreadyExists(err):
				errs = append(errs, err)
			}
		case !equality.Semantic.DeepEqual(cur.Keys, want.Keys) || !equality.Semantic.DeepEqual(cur.Nodes, want.Nodes):
			upd := cur.DeepCopy()
			upd.Keys, upd.Nodes = want.Keys, want.Nodes
			if updated, err := w.grids.SuperedgeV1().NodeLabelSummaries().Update(ctx, upd, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
				errs = append(errs, err)
			} else {
				w.written.Mutation(updated)
				klog.FromContext(ctx).V(2).Info("NodeLabelSummary written", "summary", name, "nodes", len(upd.Nodes))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d NodeLabelSummaries not written, first: %w", len(errs), errs[0])
	}
	return nil
}

// assignBuckets keeps every node in the summary that lists it (the first by
// name, should two), drops nodes that are gone, and puts new nodes into
// the buckets with room, in name order, opening new ones as needed. It
// returns every bucket's sorted members, existing empty buckets included.
func assignBuckets(current map[string]*superedgev1.NodeLabelSummary, wanted map[string]map[string]string) map[string][]string {
	members := map[string][]string{}
	placed := sets.New[string]()
	for _, name := range slices.Sorted(maps.Keys(current)) {
		members[name] = []string{}
		for _, nl := range current[name].Nodes {
			if _, ok := wanted[nl.Name]; ok && !placed.Has(nl.Name) && len(members[name]) < superedgev1.MaxNodesPerLabelSummary {
				members[name] = append(members[name], nl.Name)
				placed.Insert(nl.Name)
			}
		}
	}
	var fresh []string
	for node := range wanted {
		if !placed.Has(node) {
			fresh = append(fresh, node)
		}
	}
	slices.Sort(fresh)
	for i := 0; len(fresh) > 0; i++ {
		name := labelSummaryPrefix + strconv.Itoa(i)
		room := superedgev1.MaxNodesPerLabelSummary - len(members[name])
		if room <= 0 {
			continue
		}
		n := min(room, len(fresh))
		members[name] = append(members[name], fresh[:n]...)
		fresh = fresh[n:]
	}
	for name := range members {
		slices.Sort(members[name])
	}
	return members
}
