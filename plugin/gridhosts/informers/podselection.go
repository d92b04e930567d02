package informers

import (
	"bytes"
	"compress/flate"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// logName names the plugin's log lines where no logger is handed down.
const logName = "gridhosts"

// maxSelectorBytes bounds the pod selector: it travels in every list and
// watch URL, and the apiserver takes request headers up to 1 MiB in all.
// Beyond it every StatefulSet pod is watched, as before the selection.
const maxSelectorBytes = 512 << 10

// podSelection, in node mode, keeps the pod informer on the pods this
// node's unified names can resolve to and no others: {set}-{ordinal} for
// every grid StatefulSet of this node's nodeunit (its nodeSelector names
// this node's value of its grid key), ordinals from 0 to spec.ordinals.start
// plus the larger of spec.replicas and status.replicas, plus every pod of
// such a set the current selection already holds (a pod being scaled away
// keeps its answer until it is deleted, as before). Selected server-side by
// `statefulset.kubernetes.io/pod-name in (...)`: another nodeunit's pod
// changes reach this node not at all.
//
// When the wanted names change (a set of this nodeunit scaled, created or
// deleted; this node relabelled) a new informer lists and watches the new
// selection while the current one keeps feeding the index; once it has
// synced, its pods go into the index, then (on a relabel) this node's new
// labels, then the pods only the old selection had leave, and the old
// informer stops. No answer goes missing or names another nodeunit's pod
// meanwhile: until the switch, answers are those of the labels the index
// has, from pods of that nodeunit.
//
// The grid StatefulSets come the same way (childselection.go): those
// labelled with one of this node's label values as their nodeunit, by a
// watch that a relabel replaces once the new one has synced, children
// before pods, plus those without the label.
type podSelection struct {
	client       kubernetes.Interface
	idx          *index.Index
	children     *childView
	ready        func() bool // unlabelled children and node labels listed
	onError      cache.WatchErrorHandlerWithContext
	onChildError cache.WatchErrorHandlerWithContext

	mu sync.Mutex
	// self is this node's labels as the index has them; pendingSelf, when
	// set, the labels it will have after the next switch.
	self        map[string]string
	pendingSelf *selfChange
	cur         *podWatch
	curChildren *childWatch
	synced      bool
	kick        chan struct{}
}

// packedSelector is a pod selector kept deflated: it is read only to build
// a list or watch request and to compare selections, both rare, and 10k
// names are 0.35 MB as one string, a few percent of that deflated.
type packedSelector struct {
	size     int
	deflated []byte
}

func packSelector(sel string) packedSelector {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestSpeed) // fails only for a bad level
	_, _ = io.WriteString(w, sel)                // a bytes.Buffer takes every write
	_ = w.Close()
	return packedSelector{size: len(sel), deflated: bytes.Clone(b.Bytes())}
}

// String is the selector. Inflating what packSelector deflated in memory
// cannot fail short of corrupted memory; should it, the selection widens to
// every StatefulSet pod (as for a selector too large to send), which answers
// the same names at a higher cost, rather than stopping DNS or sending a
// request that misses pods.
func (s packedSelector) String() string {
	var b strings.Builder
	b.Grow(s.size)
	_, err := io.Copy(&b, flate.NewReader(bytes.NewReader(s.deflated)))
	if err == nil && b.Len() != s.size {
		err = fmt.Errorf("%d bytes, want %d", b.Len(), s.size)
	}
	if err != nil {
		klog.Background().WithName(logName).Error(err, "The pod selector does not inflate to what was deflated; selecting every StatefulSet pod")
		return statefulPodSelector
	}
	return b.String()
}

// is reports whether s is the selector sel.
func (s packedSelector) is(sel string) bool { return s.size == len(sel) && s.String() == sel }

func newPodSelection(client kubernetes.Interface, idx *index.Index, ready func() bool) *podSelection {
	p := &podSelection{client: client, idx: idx, ready: ready, kick: make(chan struct{}, 1)}
	p.children = newChildView(idx, p.changed)
	p.children.handingOver = p.handingOver
	return p
}

// changed asks the loop to recompute the selection.
func (p *podSelection) changed() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// selfChange is this node's labels (or its deletion) from the node label
// source, waiting for the switch.
type selfChange struct {
	node    *index.NodeObj
	deleted bool
}

// setSelf takes this node's labels from the node label source: applied to
// the index at once when they select the same pods, else with the switch.
func (p *podSelection) setSelf(c *selfChange) {
	p.mu.Lock()
	p.pendingSelf = c
	p.mu.Unlock()
	p.changed()
}

// labels is what a pending change leaves this node's labels.
func (c *selfChange) labels() map[string]string {
	if c.deleted {
		return nil
	}
	return c.node.Labels
}

// HasSynced: the first selection has synced and is the index's.
func (p *podSelection) HasSynced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

// run keeps the selection current until ctx ends.
func (p *podSelection) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	defer func() {
		p.mu.Lock()
		cur, curChildren := p.cur, p.curChildren
		p.mu.Unlock()
		if cur != nil {
			cur.stop()
			<-cur.done
		}
		if curChildren != nil {
			curChildren.stop()
			<-curChildren.done
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond) // until sets and labels are listed
	defer tick.Stop()
	ticks := tick.C
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-ticks:
		}
		if !p.ready() {
			continue
		}
		ticks = nil // from now on every change kicks
		labels, pending, cur, curChildren := p.target()
		// Children first: the pod names follow them.
		nextChildren := curChildren
		if curChildren == nil || !slices.Equal(curChildren.values, nodeunitValues(labels)) {
			nextChildren = p.startChildren(ctx, nodeunitValues(labels))
			if !p.awaitChildren(ctx, nextChildren) {
				nextChildren.stop()
				<-nextChildren.done
				continue
			}
		}
		names, all := p.wanted(labels, cur, p.setsWith(curChildren, nextChildren))
		samePods := cur != nil && cur.selector.is(selectorOf(names, all))
		if samePods && nextChildren == curChildren {
			if pending != nil {
				p.applySelf(pending)
			}
			continue
		}
		next := cur
		if !samePods {
			next = p.start(ctx, names, all)
			if !p.await(ctx, next, curChildren, nextChildren) {
				next.stop()
				<-next.done
				if nextChildren != curChildren {
					nextChildren.stop()
					<-nextChildren.done
				}
				continue // ctx ended, or the wanted names changed again: recompute
			}
		}
		if nextChildren != curChildren {
			p.goLive(curChildren, nextChildren)
		}
		p.switchTo(cur, next, pending)
		if next != cur && cur != nil {
			p.retire(cur, next)
		}
		if nextChildren != curChildren && curChildren != nil {
			p.retireChildren(curChildren, nextChildren)
		}
		logger.V(2).Info("Pod selection switched", "pods", len(names), "all", all, "nodeunitValues", len(nextChildren.values))
	}
}

// setsWith is the grid StatefulSets the selection follows: the view's,
// with next's labelled children in place of cur's when next is not live.
func (p *podSelection) setsWith(cur, next *childWatch) []*index.SetObj {
	if next == cur {
		return p.children.list(nil, false)
	}
	return p.children.list(next.objects(), true)
}

// awaitChildren waits until next has listed; false if ctx ended or this
// node's labels changed meanwhile to other nodeunit values.
func (p *podSelection) awaitChildren(ctx context.Context, next *childWatch) bool {
	return p.awaitSynced(ctx, next.synced, func() bool {
		labels, _, _, _ := p.target()
		return slices.Equal(nodeunitValues(labels), next.values)
	})
}

// awaitSynced waits until synced; false if ctx ended or, at a kick, the
// watch waited for is no longer wanted (the kick is passed on, for the loop
// to recompute).
func (p *podSelection) awaitSynced(ctx context.Context, synced, stillWanted func() bool) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !synced() {
		select {
		case <-ctx.Done():
			return false
		case <-p.kick:
			if !stillWanted() {
				p.changed()
				return false
			}
		case <-t.C:
		}
	}
	return true
}

// target is what the selection follows now: this node's labels as a
// pending change leaves them, that change, and the current watches.
func (p *podSelection) target() (map[string]string, *selfChange, *podWatch, *childWatch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	labels := p.self
	if p.pendingSelf != nil {
		labels = p.pendingSelf.labels()
	}
	return labels, p.pendingSelf, p.cur, p.curChildren
}

// wanted computes the pod names for labels (this node's) from sets.
func (p *podSelection) wanted(labels map[string]string, cur *podWatch, sets []*index.SetObj) ([]string, bool) {
	chosen := map[cache.ObjectName]bool{}
	var names []string
	for _, s := range sets {
		if !ownNodeunit(s, labels) {
			continue
		}
		chosen[cache.ObjectName{Namespace: s.Namespace, Name: s.Name}] = true
		for i := uint64(0); gridname.NodeSelectsPod(i, s.OrdinalStart, s.Replicas, s.StatusReplicas); i++ {
			names = append(names, s.Name+"-"+itoa(int64(i)))
		}
	}
	if cur != nil { // the current selection is live: its pods are the index's
		p.idx.EachPod(func(o *index.PodObj) {
			if o.HasOwner && chosen[cache.ObjectName{Namespace: o.Namespace(), Name: o.Owner.Name}] {
				names = append(names, o.Name())
			}
		})
	}
	slices.Sort(names)
	names = slices.Compact(names)
	size := 0
	for _, n := range names {
		size += len(n) + 1
	}
	if size > maxSelectorBytes {
		return nil, true
	}
	return names, false
}

// ownNodeunit: s is a grid StatefulSet whose nodeSelector names labels'
// value of its grid key (of any key it may name: the label form of a
// prefixed key is lossy, so every nodeSelector key it fits counts).
func ownNodeunit(s *index.SetObj, labels map[string]string) bool {
	if !s.HasGridSelector || len(labels) == 0 {
		return false
	}
	for k, v := range s.NodeSelector {
		if lv, ok := labels[k]; ok && lv == v && s.GridKey.Is(k) {
			return true
		}
	}
	return false
}

func itoa(i int64) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

// start lists and watches one selection; its pods reach the index only
// once it is live.
func (p *podSelection) start(ctx context.Context, names []string, all bool) *podWatch {
	return newPodWatch(ctx, p.client, p.idx, selectorOf(names, all), p.onError)
}

// selectorOf is the pod selector for names (sorted), or every StatefulSet
// pod with all; "" for no names.
func selectorOf(names []string, all bool) string {
	if all {
		return statefulPodSelector
	}
	if len(names) == 0 {
		return ""
	}
	return appsv1.StatefulSetPodNameLabel + " in (" + strings.Join(names, ",") + ")"
}

// await waits until next has synced; false if ctx ended or the selection
// changed meanwhile (another kick whose nodeunit values or wanted names
// differ). The children are nextChildren's, live or not.
func (p *podSelection) await(ctx context.Context, next *podWatch, curChildren, nextChildren *childWatch) bool {
	return p.awaitSynced(ctx, next.synced, func() bool {
		labels, _, cur, _ := p.target()
		if !slices.Equal(nodeunitValues(labels), nextChildren.values) {
			return false
		}
		names, all := p.wanted(labels, cur, p.setsWith(curChildren, nextChildren))
		return next.selector.is(selectorOf(names, all))
	})
}

// switchTo makes next the index's pods (added first; the pods only cur
// had stay until retire), then applies this node's pending labels. From
// here on cur's events are dropped: its relists would otherwise take the
// pods only next has for deleted ones.
func (p *podSelection) switchTo(cur, next *podWatch, pending *selfChange) {
	if cur != nil && cur != next {
		cur.retire()
	}
	next.goLive()
	p.mu.Lock()
	p.cur = next
	p.mu.Unlock()
	if pending != nil {
		p.applySelf(pending)
	}
	p.mu.Lock()
	p.synced = true
	p.mu.Unlock()
}

func (p *podSelection) applySelf(c *selfChange) {
	if c.deleted {
		p.idx.Delete(c.node)
	} else {
		p.idx.Upsert(c.node)
	}
	p.mu.Lock()
	if p.pendingSelf == c {
		p.pendingSelf = nil
	}
	p.self = c.labels()
	p.mu.Unlock()
}

// retire stops old and removes from the index the pods only it had,
// unless next has brought a version of them since.
func (p *podSelection) retire(old, next *podWatch) {
	old.stop()
	<-old.done
	next.dropLeaving()
}
