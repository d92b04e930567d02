package wrapper

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridinformersv1 "github.com/servicegroup/servicegroup/client/informers/externalversions/superedge/v1"
)

// Where the wrapper learns other nodes' labels.
const (
	// labelSourceSummaries: the controller's NodeLabelSummaries, which
	// change only when a node comes, goes or changes a topology label.
	labelSourceSummaries = "summaries"
	// labelSourceNodes: every Node's metadata, so every status report
	// of every node (an older controller, or SuperEdge's, writes no summaries).
	labelSourceNodes = "nodes"
)

var nodeLabelSummaries = superedgev1.SchemeGroupVersion.WithResource("nodelabelsummaries")

// DefaultNodeLabelRecheckInterval is how often a wrapper watching Nodes
// looks whether summaries have appeared: a metadata LIST of at most one
// object, a few hundred bytes.
const DefaultNodeLabelRecheckInterval = 5 * time.Minute

// nodeLabels keeps store (node name -> *metav1.PartialObjectMetadata with
// name and labels) from the NodeLabelSummaries when the controller writes
// them, else from every Node's metadata, and tells handler every change.
type nodeLabels struct {
	store   cache.Indexer
	handler cache.ResourceEventHandler
	meta    metadata.Interface
	grids   versioned.Interface
	// watchErrors classifies an informer's list/watch errors (snapshot trust).
	watchErrors func(cache.SharedIndexInformer) error
	// recheck is how often, while following Nodes, summaries are looked for.
	recheck time.Duration
	// backoff spaces the questions while upstream cannot answer.
	backoff wait.Backoff
	// ambiguousSince: when upstream first gave a 404/403 while not ready
	// (summariesListed; only the run goroutine touches it).
	ambiguousSince time.Time

	// mu serializes changes to store: the informer's handler and the
	// clean-up when a source has synced.
	mu     sync.Mutex
	synced atomic.Bool
	source atomic.Value // labelSourceSummaries or labelSourceNodes
}

func newNodeLabels(meta metadata.Interface, grids versioned.Interface, handler cache.ResourceEventHandler) *nodeLabels {
	return &nodeLabels{
		store:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		handler: handler,
		meta:    meta,
		grids:   grids,
		recheck: DefaultNodeLabelRecheckInterval,
		// As client-go's informers retry: up to 30s apart, jittered, so many
		// wrappers whose link returns at once do not ask in step.
		backoff: wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 30 * time.Second},
	}
}

// HasSynced reports whether the first source has listed every node.
func (n *nodeLabels) HasSynced() bool { return n.synced.Load() }

// Source names where labels come from now ("" until decided).
func (n *nodeLabels) Source() string {
	s, _ := n.source.Load().(string)
	return s
}

// run picks the source, follows it, and switches when summaries appear or
// disappear, until ctx ends.
func (n *nodeLabels) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		summaries, err := n.summariesPresent(ctx)
		if err != nil {
			return
		}
		if summaries {
			n.source.Store(labelSourceSummaries)
			logger.Info("Learning node labels from NodeLabelSummaries")
			n.followSummaries(ctx)
			if ctx.Err() == nil {
				logger.Info("NodeLabelSummaries are gone: watching every Node's metadata instead")
			}
			continue
		}
		n.source.Store(labelSourceNodes)
		logger.Info("No NodeLabelSummaries upstream (an older or SuperEdge's controller): watching every Node's metadata, so every node's status reports reach this node",
			"recheck", n.recheck)
		n.followNodes(ctx)
	}
}

// summariesPresent asks upstream, retrying while it cannot be reached,
// whether any NodeLabelSummary exists. Not served (no CRD) or not allowed
// (older RBAC) means no. The error is only ctx's.
func (n *nodeLabels) summariesPresent(ctx context.Context) (bool, error) {
	// Not wait.ExponentialBackoffWithContext: it gives up once the cap is
	// reached (about 30s), and a wrapper started with the cloud away must
	// keep asking until it is back.
	backoff := n.backoff
	for {
		present, err := n.summariesListed(ctx)
		if err == nil {
			return present, nil
		}
		klog.FromContext(ctx).V(2).Info("Cannot tell whether NodeLabelSummaries exist yet", "err", err)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(backoff.Step()):
		}
	}
}

func (n *nodeLabels) summariesListed(ctx context.Context) (bool, error) {
	now := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := n.meta.Resource(nodeLabelSummaries).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && !n.upstreamReady(ctx) && time.Since(n.firstAmbiguous(now)) < ambiguousGrace:
		// A kube-apiserver that has just started answers 404 for every
		// custom resource until its CRD handlers are in place, and 403
		// until its RBAC authorizer has synced: that says nothing about
		// the kind, and a wrapper coming back after an outage must not fall
		// back to watching every Node for it. Asked again (backoff) until
		// upstream is ready, for at most ambiguousGrace.
		return false, fmt.Errorf("upstream is not ready yet, so %w does not tell whether NodeLabelSummaries are served", err)
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsMethodNotSupported(err):
		n.ambiguousSince = time.Time{}
		return false, nil
	case err != nil:
		return false, err
	}
	n.ambiguousSince = time.Time{}
	return len(l.Items) > 0, nil
}

// ambiguousGrace bounds how long 404/403 answers from an upstream whose
// /readyz is not 200 are taken as "not ready yet" rather than "no summaries":
// an upstream that never lets us read /readyz still gets an answer.
const ambiguousGrace = time.Minute

// firstAmbiguous returns when the current run of ambiguous answers began.
func (n *nodeLabels) firstAmbiguous(now time.Time) time.Time {
	if n.ambiguousSince.IsZero() {
		n.ambiguousSince = now
	}
	return n.ambiguousSince
}

// upstreamReady reports whether upstream's /readyz answers 200 (which a
// kube-apiserver does only once its CRD handlers and authorizer are in
// place).
func (n *nodeLabels) upstreamReady(ctx context.Context) bool {
	return n.grids.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() == nil
}

// followSummaries mirrors the summaries into store until ctx ends or the
// last summary is deleted.
func (n *nodeLabels) followSummaries(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf := gridinformersv1.NewNodeLabelSummaryInformer(n.grids, 0, cache.Indexers{})
	if err := inf.SetTransform(dropManagedFields); err != nil {
		klog.FromContext(ctx).Error(err, "NodeLabelSummary informer")
	}
	n.classifyErrors(ctx, inf)
	m := &summaryMirror{n: n, owner: map[string]string{}}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.apply(nil, obj) },
		UpdateFunc: func(old, obj any) { m.apply(old, obj) },
		DeleteFunc: func(obj any) {
			m.forget(unwrap(obj))
			if len(inf.GetStore().ListKeys()) == 0 {
				cancel()
			}
		},
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "NodeLabelSummary informer")
		return
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return
	}
	if len(inf.GetStore().ListKeys()) == 0 {
		return
	}
	n.mu.Lock()
	n.dropAllBut(sets.KeySet(m.owner))
	n.mu.Unlock()
	n.synced.Store(true)
	<-ctx.Done()
}

// followNodes mirrors every Node's metadata into store until ctx ends or a
// recheck finds summaries.
func (n *nodeLabels) followNodes(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf := metadatainformer.NewFilteredMetadataInformer(n.meta, corev1.SchemeGroupVersion.WithResource("nodes"), "", 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(slimNodeMeta); err != nil {
		klog.FromContext(ctx).Error(err, "Node informer")
	}
	n.classifyErrors(ctx, inf)
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.locked(func() { n.set(obj.(*metav1.PartialObjectMetadata)) }) },
		UpdateFunc: func(_, obj any) { n.locked(func() { n.set(obj.(*metav1.PartialObjectMetadata)) }) },
		DeleteFunc: func(obj any) {
			if m, ok := unwrap(obj).(*metav1.PartialObjectMetadata); ok {
				n.locked(func() { n.remove(m.Name) })
			}
		},
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Node informer")
		return
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return
	}
	n.locked(func() { n.dropAllBut(sets.New(inf.GetStore().ListKeys()...)) })
	n.synced.Store(true)
	_ = wait.PollUntilContextCancel(ctx, n.recheck, false, func(ctx context.Context) (bool, error) {
		present, err := n.summariesListed(ctx)
		return err == nil && present, nil
	})
}

func (n *nodeLabels) classifyErrors(ctx context.Context, inf cache.SharedIndexInformer) {
	if n.watchErrors == nil {
		return
	}
	if err := n.watchErrors(inf); err != nil {
		klog.FromContext(ctx).Error(err, "Informer error handler")
	}
}

func (n *nodeLabels) locked(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
}

// set stores a node's labels and tells the handler when they changed.
// Callers hold mu.
func (n *nodeLabels) set(node *metav1.PartialObjectMetadata) {
	old, exists, _ := n.store.GetByKey(node.Name)
	if !exists {
		_ = n.store.Add(node)
		n.handler.OnAdd(node, false)
		return
	}
	if maps.Equal(old.(*metav1.PartialObjectMetadata).Labels, node.Labels) {
		return
	}
	_ = n.store.Update(node)
	n.handler.OnUpdate(old, node)
}

func (n *nodeLabels) remove(name string) {
	old, exists, _ := n.store.GetByKey(name)
	if !exists {
		return
	}
	_ = n.store.Delete(old)
	n.handler.OnDelete(old)
}

// dropAllBut removes the nodes the source now following does not know
// (left over from the previous source).
func (n *nodeLabels) dropAllBut(keep sets.Set[string]) {
	for _, name := range n.store.ListKeys() {
		if !keep.Has(name) {
			n.remove(name)
		}
	}
}

// summaryMirror turns summary events into per-node changes. A node is owned
// by the summary that listed it first, so a duplicate elsewhere is ignored.
type summaryMirror struct {
	n     *nodeLabels
	owner map[string]string // node -> summary name
}

func (m *summaryMirror) apply(oldObj, obj any) {
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	oldSum, _ := oldObj.(*superedgev1.NodeLabelSummary)
	sum, _ := obj.(*superedgev1.NodeLabelSummary)
	listed := sets.New[string]()
	if sum != nil {
		for _, nl := range sum.Nodes {
			listed.Insert(nl.Name)
			if o, ok := m.owner[nl.Name]; ok && o != sum.Name {
				continue
			}
			m.owner[nl.Name] = sum.Name
			m.n.set(summarisedNode(nl))
		}
	}
	if oldSum != nil {
		for _, nl := range oldSum.Nodes {
			if !listed.Has(nl.Name) && m.owner[nl.Name] == oldSum.Name {
				delete(m.owner, nl.Name)
				m.n.remove(nl.Name)
			}
		}
	}
}

// forget drops a deleted summary's claim on its nodes but keeps their
// labels: the controller deletes a summary only once its nodes are gone, so
// any other deletion (by hand, or of the CRD on a rollback) leaves the last
// known labels until the summary is written again or the Node watch that
// replaces summaries has listed every node.
func (m *summaryMirror) forget(obj any) {
	sum, ok := obj.(*superedgev1.NodeLabelSummary)
	if !ok {
		return
	}
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	for _, nl := range sum.Nodes {
		if m.owner[nl.Name] == sum.Name {
			delete(m.owner, nl.Name)
		}
	}
}

func summarisedNode(nl superedgev1.NodeLabels) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: nl.Name, Labels: nl.Labels},
	}
}

// NodeLabelSource tells where other nodes' labels come from now:
// "summaries", "nodes", or "" before upstream first answered.
func (s *Server) NodeLabelSource() string { return s.nodeLabels.Source() }
