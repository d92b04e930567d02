// Package nodelabels learns every node's labels from the controller's
// NodeLabelSummaries, falling back to watching Nodes while none exist, and
// feeds them, node by node, to whoever needs them (the wrapper, gridhosts).
package nodelabels

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
)

// Where labels come from.
const (
	// FromSummaries: the controller's NodeLabelSummaries, rewritten only
	// when a node comes, goes or changes a grid or topology key, so other
	// nodes' status reports cost nothing.
	FromSummaries = "summaries"
	// FromNodes: every Node (an older controller, or SuperEdge's, writes no
	// summaries): every status report of every node arrives.
	FromNodes = "nodes"
)

// DefaultRecheck is how often, while following Nodes, summaries are looked
// for: a metadata LIST of at most one object, a few hundred bytes.
const DefaultRecheck = 5 * time.Minute

var nodeLabelSummaries = superedgev1.SchemeGroupVersion.WithResource("nodelabelsummaries")

// ambiguousGrace bounds how long 404/403 answers from an upstream whose
// /readyz is not 200 are taken as "not ready yet" rather than "no
// summaries": an upstream that never lets us read /readyz still gets an
// answer.
const ambiguousGrace = time.Minute

// Sink is told every change of a node's labels, one call at a time.
type Sink interface {
	// Set: name is new or its labels changed. node is the Node informer's
	// object, nil when the labels come from a summary.
	Set(name string, labels map[string]string, node any)
	// Delete: name is gone.
	Delete(name string)
}

// Nodes is the caller's fallback: an informer on every Node, slimmed as the
// caller likes, and how to read a node's name and labels from its objects.
type Nodes struct {
	NewInformer func() cache.SharedIndexInformer
	Labels      func(obj any) (name string, labels map[string]string, ok bool)
}

// Source follows the summaries when upstream has any, else every Node, and
// switches when that changes. Set Recheck, Backoff and WatchErrors before
// Run.
type Source struct {
	grids versioned.Interface
	meta  metadata.Interface
	nodes Nodes
	sink  Sink
	// Recheck is how often, while following Nodes, summaries are looked for.
	Recheck time.Duration
	// Backoff spaces the questions while upstream cannot answer.
	Backoff wait.Backoff
	// WatchErrors, when set, installs the caller's list/watch error
	// handling on each informer.
	WatchErrors func(cache.SharedIndexInformer) error
	// FullRelists lists the summaries in full at every relist, without
	// asking their metadata first (summary_relist.go); only benchmarks
	// comparing the two set it.
	FullRelists bool

	// mu serializes changes to the sink: the informers' handlers and the
	// clean-up once a source has synced.
	mu sync.Mutex
	// have: the labels this source gave the sink, per node.
	have   map[string]map[string]string
	synced atomic.Bool
	from   atomic.Value // FromSummaries or FromNodes
	// ambiguousSince: when upstream first gave a 404/403 while not ready
	// (summariesListed; only Run's goroutine touches it).
	ambiguousSince time.Time
}

// New returns a Source feeding sink: grids watches the summaries and asks
// upstream's /readyz, meta looks whether any summary exists.
func New(grids versioned.Interface, meta metadata.Interface, nodes Nodes, sink Sink) *Source {
	return &Source{grids: grids, meta: meta, nodes: nodes, sink: sink, Recheck: DefaultRecheck, have: map[string]map[string]string{},
		// As client-go's informers retry: up to 30s apart, jittered, so many
		// nodes whose link returns at once do not ask in step.
		Backoff: wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 30 * time.Second}}
}

// HasSynced reports whether the first source has listed every node.
func (n *Source) HasSynced() bool { return n.synced.Load() }

// From names where labels come from now: FromSummaries, FromNodes, or ""
// before upstream first answered.
func (n *Source) From() string {
	s, _ := n.from.Load().(string)
	return s
}

// Run picks the source, follows it, and switches when summaries appear or
// disappear, until ctx ends.
func (n *Source) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		present, err := n.summariesPresent(ctx)
		if err != nil {
			return
		}
		if present {
			if n.From() != FromSummaries {
				logger.Info("Learning node labels from NodeLabelSummaries: other nodes' status reports no longer reach this node")
			}
			n.from.Store(FromSummaries)
			n.followSummaries(ctx)
			continue
		}
		if n.From() != FromNodes {
			logger.Info("No NodeLabelSummaries upstream (an older or SuperEdge's controller): watching every Node, so every node's status reports reach this node",
				"recheck", n.Recheck)
		}
		n.from.Store(FromNodes)
		n.followNodes(ctx)
	}
}

// summariesPresent asks, retrying while upstream cannot answer, whether any
// NodeLabelSummary exists. Not served (no CRD) or not allowed (older RBAC)
// means no. The error is only ctx's.
func (n *Source) summariesPresent(ctx context.Context) (bool, error) {
	// Not wait.ExponentialBackoffWithContext: it gives up once the cap is
	// reached (about 30s), and a node started with the cloud away must keep
	// asking until it is back.
	backoff := n.Backoff
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

func (n *Source) summariesListed(ctx context.Context) (bool, error) {
	now := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := n.meta.Resource(nodeLabelSummaries).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && !n.upstreamReady(ctx) && now.Sub(n.firstAmbiguous(now)) < ambiguousGrace:
		// A kube-apiserver that has just started answers 404 for every
		// custom resource until its CRD handlers are in place, and 403
		// until its RBAC authorizer has synced: that says nothing about the
		// kind, and a node coming back after an outage must not fall back
		// to watching every Node for it. Asked again (backoff) until
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

// firstAmbiguous returns when the current run of ambiguous answers began.
func (n *Source) firstAmbiguous(now time.Time) time.Time {
	if n.ambiguousSince.IsZero() {
		n.ambiguousSince = now
	}
	return n.ambiguousSince
}

// upstreamReady reports whether upstream's /readyz answers 200 (which a
// kube-apiserver does only once its CRD handlers and authorizer are in
// place).
func (n *Source) upstreamReady(ctx context.Context) bool {
	return n.grids.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() == nil
}

// followSummaries mirrors the summaries into the sink until ctx ends or the
// last summary is deleted.
func (n *Source) followSummaries(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := klog.FromContext(ctx)
	lw := &summaryListWatch{grids: n.grids, meta: n.meta, inFull: n.FullRelists}
	inf := cache.NewSharedIndexInformer(lw, &superedgev1.NodeLabelSummary{}, 0, cache.Indexers{})
	lw.held = inf.GetStore()
	if err := inf.SetTransform(slimSummary); err != nil {
		logger.Error(err, "NodeLabelSummary informer")
	}
	n.handleErrors(logger, inf)
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
		logger.Error(err, "NodeLabelSummary informer")
		return
	}
	defer start(ctx, cancel, inf)()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) || len(inf.GetStore().ListKeys()) == 0 {
		return
	}
	n.locked(func() { n.dropAllBut(sets.KeySet(m.owner)) })
	n.synced.Store(true)
	<-ctx.Done()
	if len(inf.GetStore().ListKeys()) == 0 {
		logger.Info("NodeLabelSummaries are gone: watching every Node instead")
	}
}

// followNodes mirrors every Node's labels into the sink until ctx ends or a
// recheck finds summaries.
func (n *Source) followNodes(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := klog.FromContext(ctx)
	inf := n.nodes.NewInformer()
	n.handleErrors(logger, inf)
	set := func(obj any) {
		if name, labels, ok := n.nodes.Labels(obj); ok {
			n.locked(func() { n.set(name, labels, obj) })
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if name, _, ok := n.nodes.Labels(unwrap(obj)); ok {
				n.locked(func() { n.remove(name) })
			}
		},
	})
	if err != nil {
		logger.Error(err, "Node informer")
		return
	}
	defer start(ctx, cancel, inf)()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return
	}
	n.locked(func() { n.dropAllBut(sets.New(inf.GetStore().ListKeys()...)) })
	n.synced.Store(true)
	_ = wait.PollUntilContextCancel(ctx, n.Recheck, false, func(ctx context.Context) (bool, error) {
		present, err := n.summariesListed(ctx)
		return err == nil && present, nil
	})
}

// start runs inf until ctx ends; the returned stop cancels ctx and waits
// until inf has stopped, so no handler runs after its follow* returned.
func start(ctx context.Context, cancel context.CancelFunc, inf cache.SharedIndexInformer) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx.Done())
	}()
	return func() { cancel(); <-done }
}

func (n *Source) handleErrors(logger klog.Logger, inf cache.SharedIndexInformer) {
	if n.WatchErrors == nil {
		return
	}
	if err := n.WatchErrors(inf); err != nil {
		logger.Error(err, "Informer error handler")
	}
}

func (n *Source) locked(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
}

// set tells the sink a node's labels when they changed. Callers hold mu.
func (n *Source) set(name string, labels map[string]string, node any) {
	if old, ok := n.have[name]; ok && maps.Equal(old, labels) {
		return
	}
	n.have[name] = labels
	n.sink.Set(name, labels, node)
}

// remove tells the sink a node is gone. Callers hold mu.
func (n *Source) remove(name string) {
	if _, ok := n.have[name]; !ok {
		return
	}
	delete(n.have, name)
	n.sink.Delete(name)
}

// dropAllBut removes the nodes the source now followed does not know (left
// over from the previous source). Callers hold mu.
func (n *Source) dropAllBut(keep sets.Set[string]) {
	for name := range n.have {
		if !keep.Has(name) {
			n.remove(name)
		}
	}
}

// summaryMirror turns summary events into per-node changes. A node belongs
// to the summary that listed it first; a duplicate elsewhere is ignored.
type summaryMirror struct {
	n     *Source
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
			m.n.set(nl.Name, nl.Labels, nil)
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

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// slimSummary keeps only the summary's name, UID, resourceVersion and nodes.
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
