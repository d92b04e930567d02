package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// object is what grids and children have in common.
type object interface {
	metav1.Object
	runtime.Object
}

// unit is one child a grid wants: the nodeunit value and the child's name.
type unit struct {
	value string
	name  string
}

// child is a grid's child for one unit.
type child[C object] struct {
	unit
	obj C
}

// kindOps is everything that differs between the grid kinds: how to read the
// grid and its children, what child each unit wants, how to write children and
// how to summarise them in the grid's status. The reconciler does the rest.
type kindOps[G, C object, A any] struct {
	kind      string // grid kind, e.g. "DeploymentGrid"
	childKind string // e.g. "Deployment"

	getGrid  func(namespace, name string) (G, error)
	liveGrid func(ctx context.Context, namespace, name string) (G, error)
	gridKey  func(G) string
	// units lists every child the grid wants, valid names or not.
	units     func(G) []unit
	validName func(name string) error

	getChild func(namespace, name string) (C, error)
	// children are the candidates: controlled by or labelled for the grid.
	children func(namespace, grid string) ([]C, error)
	desired  func(G, unit) (A, error)
	extract  func(C) (A, error)
	apply    func(ctx context.Context, namespace string, cfg A) (C, error)
	patch    func(ctx context.Context, namespace, name string, data []byte) (C, error)
	remove   func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error

	// ready reports whether a child is up to date and ready.
	ready func(C) bool
	// conditions reads the grid's current conditions.
	conditions func(G) []metav1.Condition
	// writeStatus builds the grid's status from its children and the
	// conditions, and writes it only if it differs.
	writeStatus func(ctx context.Context, grid G, children []child[C], conds []metav1.Condition) error
}

// gridController runs one grid kind's workqueue.
type gridController[G, C object, A any] struct {
	ops      kindOps[G, C, A]
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder record.EventRecorder
	synced   []cache.InformerSynced
}

func newGridController[G, C object, A any](ops kindOps[G, C, A], deps Deps) *gridController[G, C, A] {
	return &gridController[G, C, A]{
		ops: ops,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{
				Name:            strings.ToLower(ops.kind),
				MetricsProvider: deps.MetricsProvider,
			}),
		recorder: deps.Recorder,
	}
}

// enqueue adds the grid named by key "namespace/name".
func (c *gridController[G, C, A]) enqueueKey(key string) {
	name, err := cache.ParseObjectName(key)
	if err != nil {
		return
	}
	c.queue.Add(name)
}

func (c *gridController[G, C, A]) enqueueGrid(obj any) {
	if m, ok := objectOf(obj); ok {
		c.queue.Add(cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()})
	}
}

// gridHandlers enqueue a grid on every notification, resyncs included: a
// resync is the periodic re-check of the whole grid.
func (c *gridController[G, C, A]) gridHandlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueGrid,
		UpdateFunc: func(_, obj any) { c.enqueueGrid(obj) },
		DeleteFunc: c.enqueueGrid,
	}
}

// childHandlers enqueue the grids a child belongs to (its controller and the
// grid its label names) when the child really changed.
func (c *gridController[G, C, A]) childHandlers() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if m, ok := objectOf(obj); ok {
			for _, k := range gridKeysOf(m, c.ops.kind) {
				c.enqueueKey(k)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur any) {
			o, ok1 := objectOf(old)
			n, ok2 := objectOf(cur)
			if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
				return
			}
			enqueue(old)
			enqueue(cur)
		},
		DeleteFunc: enqueue,
	}
}

// nodeHandlers enqueue the grids whose gridUniqKey is among a node's changed
// labels; status heartbeats never reach here (the transform drops status,
// and equal label sets enqueue nothing).
func (c *gridController[G, C, A]) nodeHandlers(grids cache.Indexer) cache.ResourceEventHandler {
	enqueueFor := func(keys []string) {
		for _, k := range keys {
			objs, err := grids.ByIndex(gridUniqKeyIndex, k)
			if err != nil {
				continue
			}
			for _, o := range objs {
				c.enqueueGrid(o)
			}
		}
	}
	labelKeys := func(obj any) []string {
		m, ok := objectOf(obj)
		if !ok {
			return nil
		}
		keys := make([]string, 0, len(m.GetLabels()))
		for k := range m.GetLabels() {
			keys = append(keys, k)
		}
		return keys
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { enqueueFor(labelKeys(obj)) },
		UpdateFunc: func(old, cur any) {
			o, ok1 := objectOf(old)
			n, ok2 := objectOf(cur)
			if !ok1 || !ok2 {
				return
			}
			enqueueFor(changedLabelKeys(o.GetLabels(), n.GetLabels()))
		},
		DeleteFunc: func(obj any) { enqueueFor(labelKeys(obj)) },
	}
}

// run processes the queue with workers until ctx ends, then waits for them.
func (c *gridController[G, C, A]) run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", strings.ToLower(c.ops.kind))
	ctx = klog.NewContext(ctx, logger)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.queue.ShutDown()

	logger.Info("Starting controller", "workers", workers)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	logger.Info("Stopping controller")
}

func (c *gridController[G, C, A]) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *gridController[G, C, A]) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)

	start := time.Now()
	err := c.sync(ctx, key)
	observeReconcile(c.ops.kind, time.Since(start), err)
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing for later retry", "kind", c.ops.kind, "objectReference", key)
	c.queue.AddRateLimited(key)
	return true
}

// problem is one reason the grid is not fully reconciled.
type problem struct {
	reason  string
	message string
}

// sync makes the grid's children match its spec and nodeunits, then
// records the outcome in its status.
func (c *gridController[G, C, A]) sync(ctx context.Context, key cache.ObjectName) error {
	grid, err := c.ops.getGrid(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return nil // deleted: the garbage collector removes its children
	}
	if err != nil {
		return err
	}
	if grid.GetDeletionTimestamp() != nil {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues(strings.ToLower(c.ops.kind), klog.KObj(grid))
	ctx = klog.NewContext(ctx, logger)

	gridKey := c.ops.gridKey(grid)
	candidates, err := c.ops.children(grid.GetNamespace(), grid.GetName())
	if err != nil {
		return err
	}
	if reason, err := validGrid(grid.GetName(), gridKey); err != nil {
		// Bad spec: touch no child, only report (the status still lists them).
		var kept []child[C]
		for _, ch := range candidates {
			if metav1.IsControlledBy(ch, grid) {
				value := strings.TrimPrefix(ch.GetName(), grid.GetName()+"-")
				kept = append(kept, child[C]{unit{value: value, name: ch.GetName()}, ch})
			}
		}
		return c.finish(ctx, grid, kept, []problem{{reason, err.Error()}})
	}
	var errs []error
	var problems []problem
	controlled := map[string]C{}
	for _, ch := range candidates {
		if !metav1.IsControlledBy(ch, grid) {
			continue
		}
		if ch.GetLabels()[superedgev1.LabelGridSelector] != grid.GetName() {
			if err := c.release(ctx, grid, ch); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		controlled[ch.GetName()] = ch
	}

	units := c.ops.units(grid)
	wanted := make(map[string]bool, len(units))
	kept := make([]child[C], 0, len(units))
	for _, u := range units {
		wanted[u.name] = true
		live, isOurs := controlled[u.name]
		if err := c.ops.validName(u.name); err != nil {
			problems = append(problems, problem{ReasonInvalidChildName,
				fmt.Sprintf("nodeunit %q skipped: %s name %q %v", u.value, c.ops.childKind, u.name, err)})
			if isOurs {
				kept = append(kept, child[C]{u, live}) // never delete what exists
			}
			continue
		}
		adopt := false
		if !isOurs {
			other, err := c.ops.getChild(grid.GetNamespace(), u.name)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs = append(errs, err)
				continue
			case !c.adoptable(grid, gridKey, other):
				problems = append(problems, problem{ReasonNameConflict,
					fmt.Sprintf("nodeunit %q skipped: %s %q exists and is not this grid's to take", u.value, c.ops.childKind, u.name)})
				continue
			default:
				if err := c.recheck(ctx, grid); err != nil {
					errs = append(errs, err)
					continue
				}
				live, adopt = other, true
			}
		}
		obj, err := c.ensure(ctx, grid, u, live, isOurs || adopt)
		if err != nil {
			problems = append(problems, problem{ReasonApplyFailed, fmt.Sprintf("nodeunit %q: %s %q: %v", u.value, c.ops.childKind, u.name, err)})
			errs = append(errs, err)
			if isOurs {
				kept = append(kept, child[C]{u, live})
			}
			continue
		}
		if adopt {
			c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonAdopted, "Adopted %s %s", c.ops.childKind, u.name)
		}
		kept = append(kept, child[C]{u, obj})
	}

	// Children of nodeunits that no longer exist go; only ours, only those.
	for name, ch := range controlled {
		if wanted[name] {
			continue
		}
		uid := ch.GetUID()
		err := c.ops.remove(ctx, ch.GetNamespace(), name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", c.ops.childKind, name, err))
			continue
		}
		logger.V(2).Info("Deleted child of a vanished nodeunit", "child", klog.KObj(ch))
		c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonDeleted, "Deleted %s %s: its nodeunit is gone", c.ops.childKind, name)
	}

	errs = append(errs, c.finish(ctx, grid, kept, problems))
	return errors.Join(errs...)
}

// adoptable: an orphan carrying both grid labels of this grid.
func (c *gridController[G, C, A]) adoptable(grid G, gridKey string, obj C) bool {
	if metav1.GetControllerOfNoCopy(obj) != nil || obj.GetDeletionTimestamp() != nil {
		return false
	}
	l := obj.GetLabels()
	return l[superedgev1.LabelGridSelector] == grid.GetName() && l[superedgev1.LabelGridUniqKey] == gridKey
}

// recheck confirms with a live read that the grid still exists and is not
// being deleted before adopting anything (the cache may be stale).
func (c *gridController[G, C, A]) recheck(ctx context.Context, grid G) error {
	fresh, err := c.ops.liveGrid(ctx, grid.GetNamespace(), grid.GetName())
	if err != nil {
		return err
	}
	if fresh.GetUID() != grid.GetUID() {
		return fmt.Errorf("%s %s/%s was recreated (uid %s, cached %s)", c.ops.kind, grid.GetNamespace(), grid.GetName(), fresh.GetUID(), grid.GetUID())
	}
	if fresh.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s %s/%s is being deleted", c.ops.kind, grid.GetNamespace(), grid.GetName())
	}
	return nil
}

// release drops our controller reference from a child we no longer select.
func (c *gridController[G, C, A]) release(ctx context.Context, grid G, ch C) error {
	_, err := c.ops.patch(ctx, ch.GetNamespace(), ch.GetName(), releasePatch(grid, ch))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s %s: %w", c.ops.childKind, ch.GetName(), err)
	}
	klog.FromContext(ctx).V(2).Info("Released child whose labels no longer match", "child", klog.KObj(ch))
	c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonReleased, "Released %s %s: its %s label no longer names this grid",
		c.ops.childKind, ch.GetName(), superedgev1.LabelGridSelector)
	return nil
}

// ensure applies the wanted child unless live already matches it.
func (c *gridController[G, C, A]) ensure(ctx context.Context, grid G, u unit, live C, hasLive bool) (C, error) {
	var zero C
	cfg, err := c.ops.desired(grid, u)
	if err != nil {
		return zero, err
	}
	if hasLive && metav1.IsControlledBy(live, grid) {
		want, err := toJSONMap(cfg)
		if err != nil {
			return zero, err
		}
		if ext, err := c.ops.extract(live); err == nil {
			if same, err := upToDate(live, want, ext); err == nil && same {
				return live, nil
			}
		}
	}
	obj, err := c.ops.apply(ctx, grid.GetNamespace(), cfg)
	if err != nil {
		return zero, err
	}
	countChildWrite(c.ops.kind)
	klog.FromContext(ctx).V(2).Info("Applied child", "child", klog.KObj(obj), "nodeunit", u.value)
	return obj, nil
}

// finish sets the conditions, emits Warning Events when the reconciled state
// changes (not on every resync), and writes the status if it changed.
func (c *gridController[G, C, A]) finish(ctx context.Context, grid G, kept []child[C], problems []problem) error {
	old := c.ops.conditions(grid)
	conds := make([]metav1.Condition, len(old))
	copy(conds, old)
	gen := grid.GetGeneration()

	reconciled := metav1.Condition{Type: superedgev1.ConditionReconciled, Status: metav1.ConditionTrue, Reason: ReasonReconciled,
		Message: fmt.Sprintf("every %s is in place", c.ops.childKind), ObservedGeneration: gen}
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.message
		}
		reconciled.Status, reconciled.Reason, reconciled.Message = metav1.ConditionFalse, problems[0].reason, strings.Join(msgs, "; ")
	}
	ready := 0
	for _, ch := range kept {
		if c.ops.ready(ch.obj) {
			ready++
		}
	}
	readyCond := metav1.Condition{Type: superedgev1.ConditionReady, ObservedGeneration: gen}
	switch {
	case len(kept) == 0:
		readyCond.Status, readyCond.Reason, readyCond.Message = metav1.ConditionFalse, ReasonNoNodeUnits, fmt.Sprintf("no %s exists", c.ops.childKind)
	case ready == len(kept) && len(problems) == 0:
		readyCond.Status, readyCond.Reason, readyCond.Message = metav1.ConditionTrue, ReasonReady, fmt.Sprintf("%d/%d ready", ready, len(kept))
	default:
		readyCond.Status, readyCond.Reason, readyCond.Message = metav1.ConditionFalse, ReasonNotReady, fmt.Sprintf("%d/%d ready", ready, len(kept))
	}

	prev := meta.FindStatusCondition(old, superedgev1.ConditionReconciled)
	changed := prev == nil || prev.Status != reconciled.Status || prev.Reason != reconciled.Reason || prev.Message != reconciled.Message
	meta.SetStatusCondition(&conds, reconciled)
	meta.SetStatusCondition(&conds, readyCond)
	if changed && len(problems) > 0 {
		for _, p := range problems {
			klog.FromContext(ctx).Info("Grid not fully reconciled", "reason", p.reason, "message", p.message)
			c.recorder.Event(grid, corev1.EventTypeWarning, p.reason, p.message)
		}
	}
	if err := c.ops.writeStatus(ctx, grid, kept, conds); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}
