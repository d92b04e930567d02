package informers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podWatch is one pod selection's list and watch. Its pods are held once:
// in a map of its own until the selection is live, then in the index's
// pods, which are exactly the live selection's. A shared informer would
// keep a store of every pod beside the index's map (0.64 MB at 10k pods)
// and a notification ring that the initial list grows and never shrinks;
// client-go's lower-level controller runs over these pods instead. Its
// queue hands over a list (or relist) whole, as one ReplacedAll: a queue
// entry per pod would leave an array of 10k entries behind it.
type podWatch struct {
	ctrl     cache.Controller // nil: nothing selected, no watch at all
	stop     context.CancelFunc
	done     chan struct{}
	selector packedSelector
	idx      *index.Index

	mu    sync.Mutex
	phase podPhase
	pods  map[string]*index.PodObj // phase pending: the selection's pods
	// leaving, once live: the pods only the selection before had, in the
	// index until this node's labels have moved (podSelection.retire).
	leaving []*index.PodObj
}

type podPhase uint8

const (
	// pending: listing and watching; nothing reaches the index.
	pending podPhase = iota
	// live: events go to the index, which holds the selection's pods.
	live
	// retired: replaced by another selection; events are dropped.
	retired
)

// newPodWatch lists and watches the pods sel selects, from the start
// pending; onError is told of every failed list or watch.
func newPodWatch(ctx context.Context, client kubernetes.Interface, idx *index.Index, sel string, onError cache.WatchErrorHandlerWithContext) *podWatch {
	w := &podWatch{selector: packSelector(sel), idx: idx, done: make(chan struct{}), pods: map[string]*index.PodObj{}}
	wctx, cancel := context.WithCancel(ctx)
	w.stop = cancel
	if sel == "" {
		close(w.done)
		return w
	}
	packed := w.selector
	lw := cache.ToListWatcherWithWatchListSemantics(cache.NewFilteredListWatchFromClient(client.CoreV1().RESTClient(),
		"pods", metav1.NamespaceAll, func(o *metav1.ListOptions) { o.LabelSelector = packed.String() }), client)
	w.ctrl = cache.New(&cache.Config{
		Queue: cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
			Name:         "gridhosts pod selection",
			KeyFunction:  cache.MetaNamespaceKeyFunc,
			Transformer:  index.Transform,
			AtomicEvents: true,
		}),
		ListerWatcher:                lw,
		ObjectType:                   &corev1.Pod{},
		ObjectDescription:            "pods (selected by name)",
		Process:                      w.process,
		WatchErrorHandlerWithContext: onError,
	})
	go func() {
		defer close(w.done)
		w.ctrl.RunWithContext(wctx)
	}()
	return w
}

// synced: the selection's first list has been processed.
func (w *podWatch) synced() bool { return w.ctrl == nil || w.ctrl.HasSynced() }

// process applies the queue's changes to where the pods are kept now, as
// a shared informer applies them to its store and handlers.
func (w *podWatch) process(obj any, initial bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return errors.New("pod selection: the queue gave no Deltas")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range deltas {
		switch d.Type {
		case cache.ReplacedAll:
			info, ok := d.Object.(cache.ReplacedAllInfo)
			if !ok {
				return fmt.Errorf("pod selection: ReplacedAll with %T", d.Object)
			}
			w.replace(info.Objects, initial)
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			if p, ok := d.Object.(*index.PodObj); ok {
				w.put(p, initial)
			}
		case cache.Deleted:
			w.remove(d.Object)
		}
	}
	return nil
}

// replace makes objs the selection's pods: a (re)list. Callers hold w.mu.
func (w *podWatch) replace(objs []any, initial bool) {
	listed := make(map[string]*index.PodObj, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*index.PodObj); ok {
			listed[p.Key()] = p
		}
	}
	switch w.phase {
	case pending:
		w.pods = listed
	case live:
		leaving := make(map[*index.PodObj]bool, len(w.leaving))
		for _, p := range w.leaving {
			leaving[p] = true
		}
		var gone []*index.PodObj
		w.idx.EachPod(func(p *index.PodObj) {
			if _, ok := listed[p.Key()]; !ok && !leaving[p] {
				gone = append(gone, p)
			}
		})
		for _, p := range gone {
			w.idx.Delete(p)
		}
		for _, p := range listed {
			w.put(p, initial)
		}
	}
}

// put adds or replaces p. Callers hold w.mu.
func (w *podWatch) put(p *index.PodObj, initial bool) {
	switch w.phase {
	case pending:
		w.pods[p.Key()] = p
	case live:
		var old any
		if o, known := w.idx.Pod(p.Key()); known {
			old = o
		}
		w.idx.UpsertEvent(old, p, initial)
	}
}

// remove deletes obj, a pod or the last state of one. Callers hold w.mu.
func (w *podWatch) remove(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*index.PodObj)
	if !ok {
		return
	}
	switch w.phase {
	case pending:
		delete(w.pods, p.Key())
	case live:
		w.idx.Delete(p)
	}
}

// goLive puts the selection's pods into the index and makes its events the
// index's; the pods the index had that the selection does not stay, as
// leaving, until dropLeaving.
func (w *podWatch) goLive() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.phase == live {
		return
	}
	w.idx.EachPod(func(p *index.PodObj) {
		if _, kept := w.pods[p.Key()]; !kept {
			w.leaving = append(w.leaving, p)
		}
	})
	for _, p := range w.pods {
		w.idx.Upsert(p)
	}
	w.pods, w.phase = nil, live
}

// dropLeaving removes the leaving pods from the index, except those the
// selection has brought a version of since.
func (w *podWatch) dropLeaving() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.leaving {
		w.idx.DeletePodIfSame(p)
	}
	w.leaving = nil
}

// retire drops the selection's events from now on.
func (w *podWatch) retire() {
	w.mu.Lock()
	w.phase, w.pods = retired, nil
	w.mu.Unlock()
}
