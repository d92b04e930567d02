package gridhosts

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
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridinformersv1 "github.com/servicegroup/servicegroup/client/informers/externalversions/superedge/v1"
)

// Where node mode learns every node's labels.
const (
	// nodeSourceSummaries: the controller's NodeLabelSummaries, rewritten
	// only when a node comes, goes or changes a grid or topology key, so
	// other nodes' status reports cost this node nothing.
	nodeSourceSummaries = "summaries"
	// nodeSourceNodes: every Node (an older controller, or SuperEdge's,
	// writes no summaries): every status report of every node arrives.
	nodeSourceNodes = "nodes"
)

// defaultNodeRecheck is how often, while following Nodes, summaries are
// looked for: a LIST of at most one object.
const defaultNodeRecheck = 5 * time.Minute

// ambiguousGrace bounds how long 404/403 from an apiserver whose /readyz is
// not 200 yet are taken as "not ready" rather than "no summaries".
const ambiguousGrace = time.Minute

// nodeLabelSource feeds the index every node's labels in node mode, where
// only labels matter (InternalIPs place clients, which node mode does not
// do). It follows the NodeLabelSummaries when upstream has any, else every
// Node, and switches when that changes.
type nodeLabelSource struct {
	kube    kubernetes.Interface
	grids   versioned.Interface
	idx     *Index
	recheck time.Duration
	// backoff spaces the questions while the apiserver cannot answer.
	backoff wait.Backoff
	// onError is told every list/watch error (the "nodes" source's state).
	onError func(context.Context, *cache.Reflector, error)

	mu sync.Mutex
	// have: the labels this source put in the index, per node.
	have   map[string]map[string]string
	synced atomic.Bool
	source atomic.Value // nodeSourceSummaries or nodeSourceNodes
	// ambiguousSince is touched only by run's goroutine.
	ambiguousSince time.Time
}

func newNodeLabelSource(kube kubernetes.Interface, grids versioned.Interface, idx *Index) *nodeLabelSource {
	return &nodeLabelSource{kube: kube, grids: grids, idx: idx, recheck: defaultNodeRecheck, have: map[string]map[string]string{},
		// As client-go's informers retry: up to 30s apart, jittered, so many
		// nodes whose link returns at once do not ask in step.
		backoff: wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 30 * time.Second}}
}

// HasSynced reports whether the first source has listed every node.
func (n *nodeLabelSource) HasSynced() bool { return n.synced.Load() }

// Source names where labels come from now ("" until decided).
func (n *nodeLabelSource) Source() string {
	s, _ := n.source.Load().(string)
	return s
}

// run picks the source, follows it, and switches when summaries appear or
// disappear, until ctx ends.
func (n *nodeLabelSource) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		present, err := n.summariesPresent(ctx)
		if err != nil {
			return
		}
		if present {
			if n.Source() != nodeSourceSummaries {
				logger.Info("Learning node labels from NodeLabelSummaries: other nodes' status reports no longer reach this CoreDNS")
			}
			n.source.Store(nodeSourceSummaries)
			n.followSummaries(ctx)
			continue
		}
		if n.Source() != nodeSourceNodes {
			logger.Info("No NodeLabelSummaries (an older or SuperEdge's controller): watching every Node, so every node's status reports reach this CoreDNS",
				"recheck", n.recheck)
		}
		n.source.Store(nodeSourceNodes)
		n.followNodes(ctx)
	}
}

// summariesPresent asks, retrying while the apiserver cannot answer, whether
// any NodeLabelSummary exists. Not served (no CRD) or not allowed (older
// RBAC) means no. The error is ctx's.
func (n *nodeLabelSource) summariesPresent(ctx context.Context) (bool, error) {
	// Not wait.ExponentialBackoffWithContext: it gives up once the cap is
	// reached (about 30s), and a node that boots with the cloud away must
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

func (n *nodeLabelSource) summariesListed(ctx context.Context) (bool, error) {
	now := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := n.grids.SuperedgeV1().NodeLabelSummaries().List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && !n.upstreamReady(ctx) && now.Sub(n.firstAmbiguous(now)) < ambiguousGrace:
		// A kube-apiserver that has just started answers 404 for custom
		// resources until its CRD handlers are in place and 403 until its
		// authorizer has synced: that says nothing about the kind.
		return false, fmt.Errorf("apiserver not ready yet, so %w does not tell whether NodeLabelSummaries are served", err)
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsMethodNotSupported(err):
		n.ambiguousSince = time.Time{}
		return false, nil
	case err != nil:
		return false, err
	}
	n.ambiguousSince = time.Time{}
	return len(l.Items) > 0, nil
}

func (n *nodeLabelSource) firstAmbiguous(now time.Time) time.Time {
	if n.ambiguousSince.IsZero() {
		n.ambiguousSince = now
	}
	return n.ambiguousSince
}

func (n *nodeLabelSource) upstreamReady(ctx context.Context) bool {
	return n.kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() == nil
}

// followSummaries mirrors the summaries into the index until ctx ends or
// the last summary is deleted.
func (n *nodeLabelSource) followSummaries(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := klog.FromContext(ctx)
	inf := gridinformersv1.NewNodeLabelSummaryInformer(n.grids, 0, cache.Indexers{})
	if err := inf.SetTransform(slimSummary); err != nil {
		logger.Error(err, "NodeLabelSummary informer")
	}
	n.handleErrors(logger, inf)
	m := &summaryMirror{n: n, owner: map[string]string{}}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.apply(nil, obj) },
		UpdateFunc: func(old, obj any) { m.apply(old, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m.forget(obj)
			if len(inf.GetStore().ListKeys()) == 0 {
				cancel()
			}
		},
	})
	if err != nil {
		logger.Error(err, "NodeLabelSummary informer")
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx.Done())
	}()
	defer func() { cancel(); <-done }()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) || len(inf.GetStore().ListKeys()) == 0 {
		return
	}
	n.mu.Lock()
	n.dropAllBut(sets.KeySet(m.owner))
	n.mu.Unlock()
	n.synced.Store(true)
	<-ctx.Done()
	if len(inf.GetStore().ListKeys()) == 0 {
		logger.Info("NodeLabelSummaries are gone: watching every Node instead")
	}
}

// followNodes mirrors every Node's labels into the index until ctx ends or
// a recheck finds summaries.
func (n *nodeLabelSource) followNodes(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := klog.FromContext(ctx)
	inf := coreinformers.NewNodeInformer(n.kube, 0, cache.Indexers{})
	if err := inf.SetTransform(slimNode); err != nil {
		logger.Error(err, "Node informer")
	}
	n.handleErrors(logger, inf)
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.locked(func() { n.set(obj.(*nodeObj)) }) },
		UpdateFunc: func(_, obj any) { n.locked(func() { n.set(obj.(*nodeObj)) }) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, ok := obj.(*nodeObj); ok {
				n.locked(func() { n.remove(o.Name) })
			}
		},
	})
	if err != nil {
		logger.Error(err, "Node informer")
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx.Done())
	}()
	defer func() { cancel(); <-done }()
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

func (n *nodeLabelSource) handleErrors(logger klog.Logger, inf cache.SharedIndexInformer) {
	if n.onError == nil {
		return
	}
	if err := inf.SetWatchErrorHandlerWithContext(n.onError); err != nil {
		logger.Error(err, "Informer error handler")
	}
}

func (n *nodeLabelSource) locked(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
}

// set puts a node's labels in the index when they changed. Callers hold mu.
func (n *nodeLabelSource) set(o *nodeObj) {
	if old, ok := n.have[o.Name]; ok && maps.Equal(old, o.Labels) {
		return
	}
	n.have[o.Name] = o.Labels
	n.idx.Upsert(o)
}

// remove takes a node out of the index. Callers hold mu.
func (n *nodeLabelSource) remove(name string) {
	if _, ok := n.have[name]; !ok {
		return
	}
	delete(n.have, name)
	n.idx.Delete(&nodeObj{tiny: tiny{ObjectMeta: metav1.ObjectMeta{Name: name}}})
}

// dropAllBut removes the nodes the source now followed does not know (left
// over from the previous source). Callers hold mu.
func (n *nodeLabelSource) dropAllBut(keep sets.Set[string]) {
	for name := range n.have {
		if !keep.Has(name) {
			n.remove(name)
		}
	}
}

// summaryMirror turns summary events into per-node changes. A node belongs
// to the summary that listed it first; a duplicate elsewhere is ignored.
type summaryMirror struct {
	n     *nodeLabelSource
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
// labels: the controller deletes no summary that still lists nodes, so any
// other deletion (by hand, or of the CRD on a rollback) keeps the last known
// labels until the summary is back or the Node watch replacing it has
// listed every node.
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

func summarisedNode(nl superedgev1.NodeLabels) *nodeObj {
	return &nodeObj{tiny: tiny{ObjectMeta: metav1.ObjectMeta{Name: nl.Name}, received: time.Now()}, Labels: nl.Labels}
}

// slimSummary keeps only the summary's name, resourceVersion and nodes.
func slimSummary(obj any) (any, error) {
	s, ok := obj.(*superedgev1.NodeLabelSummary)
	if !ok {
		return obj, nil
	}
	return &superedgev1.NodeLabelSummary{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Nodes:      s.Nodes,
	}, nil
}

// slimNode keeps a Node's name and labels: node mode places no client by
// its InternalIP.
func slimNode(obj any) (any, error) {
	o, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n := &nodeObj{tiny: newTiny(&o.ObjectMeta)}
	if len(o.Labels) > 0 {
		n.Labels = maps.Clone(o.Labels)
	}
	return n, nil
}
