package informers

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// In node mode the grid StatefulSets (children) come from two watches: the
// children labelled with one of this node's label values as their nodeunit
// (the controller labels every child it keeps with its nodeunit value), and
// the children without that label (SuperEdge's, before the controller takes
// them over; empty afterwards). Another nodeunit's child, labelled, reaches
// this node not at all.
const unlabelledChildSelector = superedgev1.LabelGridSelector + ",!" + superedgev1.LabelGridNodeUnit

// childSelector selects the labelled children of nodeunit values; "" when
// there are none (nothing to watch).
func childSelector(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return superedgev1.LabelGridSelector + "," + superedgev1.LabelGridNodeUnit + " in (" + strings.Join(values, ",") + ")"
}

// nodeunitValues are the label values a child of this node's nodeunit can
// carry as its nodeunit: every non-empty value of the node's labels, sorted
// (a grid's nodeunit is the node's value of its key, whichever key it is).
func nodeunitValues(labels map[string]string) []string {
	var out []string
	for _, v := range labels {
		if v != "" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// childWatch is the informer of the labelled children of one set of
// nodeunit values; its events reach the children view only once it is
// live, under mu.
type childWatch struct {
	inf    cache.SharedIndexInformer
	reg    cache.ResourceEventHandlerRegistration
	stop   context.CancelFunc
	done   chan struct{}
	values []string

	mu   sync.Mutex
	live bool
}

// objects lists what w holds.
func (w *childWatch) objects() []any {
	if w == nil || w.inf == nil {
		return nil
	}
	return w.inf.GetStore().List()
}

// startChildren runs an informer on the labelled children of values.
// Every event asks the selection loop to recompute (the pod names follow
// the children); it is applied to the children view only once w is live.
func (p *podSelection) startChildren(ctx context.Context, values []string) *childWatch {
	w := &childWatch{values: values, done: make(chan struct{})}
	wctx, cancel := context.WithCancel(ctx)
	w.stop = cancel
	sel := childSelector(values)
	if sel == "" {
		close(w.done)
		return w
	}
	w.inf = appsinformers.NewFilteredStatefulSetInformer(p.client, metav1.NamespaceAll, 0, cache.Indexers{}, selecting(sel))
	_ = w.inf.SetTransform(index.Transform) // cannot fail: not started
	if p.onChildError != nil {
		_ = w.inf.SetWatchErrorHandlerWithContext(p.onChildError)
	}
	apply := func(obj any, deleted, observe bool) {
		w.ifLive(func() { p.children.set(labelledSlot, obj, deleted, observe) })
		p.changed()
	}
	w.reg, _ = w.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { apply(obj, false, !initial) },
		UpdateFunc: func(_, obj any) { apply(obj, false, true) },
		DeleteFunc: func(obj any) { apply(obj, true, false) },
	})
	go func() {
		defer close(w.done)
		w.inf.RunWithContext(wctx)
	}()
	return w
}

// synced: w has listed (a watch with nothing to select is at once).
func (w *childWatch) synced() bool { return w.inf == nil || w.reg.HasSynced() }

// goLive makes next the labelled children (its children enter the view,
// old's events stop applying); retireChildren later drops what only old had.
func (p *podSelection) goLive(old, next *childWatch) {
	if old != nil {
		old.mu.Lock()
		old.live = false
		old.mu.Unlock()
	}
	next.mu.Lock()
	for _, obj := range next.objects() {
		p.children.set(labelledSlot, obj, false, false)
	}
	next.live = true
	next.mu.Unlock()
	p.mu.Lock()
	p.curChildren = next
	p.mu.Unlock()
}

// retireChildren stops old and drops from the view the children next does
// not hold (the unlabelled watch may still hold them: then they stay).
func (p *podSelection) retireChildren(old, next *childWatch) {
	old.stop()
	<-old.done
	keep := map[string]bool{}
	for _, obj := range next.objects() {
		if k, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			keep[k] = true
		}
	}
	next.mu.Lock()
	defer next.mu.Unlock()
	for _, obj := range old.objects() {
		if k, err := cache.MetaNamespaceKeyFunc(obj); err == nil && !keep[k] {
			p.children.set(labelledSlot, obj, true, false)
		}
	}
	p.children.dropHandovers(keep)
}

// handingOver: child s, which the unlabelled watch dropped, still exists
// and now carries a nodeunit label that the live labelled watch selects
// (the controller took it over), so that watch will deliver it. One
// request, only when an unlabelled child leaves that watch (SuperEdge's
// children, at takeover or deletion): a list by name, which the list and
// watch rights gridhosts has allow (a get would need one more).
func (p *podSelection) handingOver(s *index.SetObj) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := p.client.AppsV1().StatefulSets(s.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", s.Name).String(),
		LabelSelector: superedgev1.LabelGridSelector + "," + superedgev1.LabelGridNodeUnit,
	})
	if err != nil || len(list.Items) != 1 || list.Items[0].UID != s.UID {
		return false
	}
	v, ok := list.Items[0].Labels[superedgev1.LabelGridNodeUnit]
	if !ok {
		return false
	}
	p.mu.Lock()
	w := p.curChildren
	p.mu.Unlock()
	_, found := slices.BinarySearch(w.valuesOrNil(), v)
	return found
}

func (w *childWatch) valuesOrNil() []string {
	if w == nil {
		return nil
	}
	return w.values
}

// The two watches a child can come from.
const (
	labelledSlot = iota
	unlabelledSlot
)

// childView is the children of both watches as one: a child is kept while
// either holds it, and the index has the newer copy. At takeover a child
// leaves the unlabelled watch and enters the labelled one, two streams in
// no set order: when the unlabelled watch drops a child the labelled one
// does not hold (yet), handingOver asks the apiserver whether it now
// carries a nodeunit label the labelled watch selects; then its copy stays
// until that watch delivers it, so its names are answered throughout. Every
// change of what the view holds is applied to the index and asks the
// selection loop to recompute.
type childView struct {
	idx         *index.Index
	changed     func()
	handingOver func(*index.SetObj) bool
	mu          sync.Mutex
	byKey       map[string]*childCopies
}

// childCopies is one child as each watch has it.
type childCopies struct {
	c [2]*index.SetObj
	// handover: the unlabelled copy stays until the labelled watch has it.
	handover bool
}

func newChildView(idx *index.Index, changed func()) *childView {
	return &childView{idx: idx, changed: changed, byKey: map[string]*childCopies{}}
}

// set records obj (or its deletion) as slot's copy; observe: a watched
// change (not an initial list), for the write-to-answerable metric.
func (v *childView) set(slot int, obj any, deleted, observe bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	t, err := index.Transform(obj)
	if err != nil {
		return
	}
	s, ok := t.(*index.SetObj)
	if !ok {
		return
	}
	key := s.Namespace + "/" + s.Name
	if slot == unlabelledSlot && deleted && v.handingOver != nil && v.onlyUnlabelled(key) && v.handingOver(s) {
		v.mu.Lock()
		if e := v.byKey[key]; e != nil && e.c[labelledSlot] == nil {
			e.handover = true
			v.mu.Unlock()
			return
		}
		v.mu.Unlock() // the labelled watch has it by now: an ordinary drop
	}
	v.mu.Lock()
	e := v.byKey[key]
	if e == nil {
		if deleted {
			v.mu.Unlock()
			return
		}
		e = &childCopies{}
		v.byKey[key] = e
	}
	before := newer(e.c[0], e.c[1])
	if deleted {
		e.c[slot] = nil
	} else {
		e.c[slot] = s
	}
	if slot == labelledSlot && e.handover {
		e.c[unlabelledSlot], e.handover = nil, false
	}
	after := newer(e.c[0], e.c[1])
	v.apply(key, before, after, observe)
}

// apply puts the change from before to after (either may be nil) in the
// index and unlocks v.mu. Under v.mu, the two watches' events reach the
// index in the order decided here.
func (v *childView) apply(key string, before, after *index.SetObj, observe bool) {
	same := before != nil && after != nil && before.UID == after.UID && before.ResourceVersion == after.ResourceVersion
	switch {
	case after == nil:
		delete(v.byKey, key)
		if before != nil {
			v.idx.Delete(before)
		}
	case !same:
		v.idx.Upsert(after)
		if observe {
			v.idx.ObservedWrite(after)
		}
	}
	v.mu.Unlock()
	if !same {
		v.changed()
	}
}

// onlyUnlabelled reports whether only the unlabelled watch holds key.
func (v *childView) onlyUnlabelled(key string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.byKey[key]
	return e != nil && e.c[unlabelledSlot] != nil && e.c[labelledSlot] == nil
}

// dropHandovers drops the handed-over copies whose child the labelled
// watch now live (keep) does not hold: it will not deliver them.
func (v *childView) dropHandovers(keep map[string]bool) {
	v.mu.Lock()
	var drop []string
	for k, e := range v.byKey {
		if e.handover && !keep[k] {
			drop = append(drop, k)
		}
	}
	v.mu.Unlock()
	for _, k := range drop {
		v.mu.Lock()
		e := v.byKey[k]
		if e == nil || !e.handover {
			v.mu.Unlock()
			continue
		}
		before := newer(e.c[0], e.c[1])
		e.c[unlabelledSlot], e.handover = nil, false
		v.apply(k, before, newer(e.c[0], e.c[1]), false)
	}
}

// list is every child the view holds (its newer copy), with the labelled
// copies replaced by labelled when that is not nil (a watch not live yet).
func (v *childView) list(labelled []any, replace bool) []*index.SetObj {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]*index.SetObj{}
	for k, e := range v.byKey {
		if replace {
			if e.c[unlabelledSlot] != nil {
				out[k] = e.c[unlabelledSlot]
			}
			continue
		}
		out[k] = newer(e.c[0], e.c[1])
	}
	if replace {
		for _, obj := range labelled {
			s, ok := obj.(*index.SetObj)
			if !ok {
				continue
			}
			k := s.Namespace + "/" + s.Name
			out[k] = newer(out[k], s)
		}
	}
	return slices.Collect(maps.Values(out))
}

// newer is the later write of two copies of one object (nil when both are).
func newer(a, b *index.SetObj) *index.SetObj {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	if c, err := resourceversion.CompareResourceVersion(a.ResourceVersion, b.ResourceVersion); err == nil && c < 0 {
		return b
	}
	return a
}

// unlabelledHandler feeds the view from the watch of unlabelled children.
func (v *childView) unlabelledHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { v.set(unlabelledSlot, obj, false, !initial) },
		UpdateFunc: func(_, obj any) { v.set(unlabelledSlot, obj, false, true) },
		DeleteFunc: func(obj any) { v.set(unlabelledSlot, obj, true, false) },
	}
}

// ifLive applies an event while w is live, under w.mu: the switch and the
// retirement never interleave with an event being applied.
func (w *childWatch) ifLive(apply func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.live {
		apply()
	}
}

// selecting narrows an informer's lists and watches to the label selector
// sel.
func selecting(sel string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = sel }
}
