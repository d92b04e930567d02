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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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

// unit is one child a grid wants: the nodeunit value, the child's name and
// the name of the template it is built from (workload grids only).
type unit struct {
	value    string
	name     string
	template string
	// override, when set, is the JSON of the template to build from instead
	// of the spec's (a rollout's last good template).
	override []byte
}

// child is a grid's child for one unit, and what the controller is
// waiting to do with it (status only).
type child[C object] struct {
	unit
	obj     C
	pending string
	// rollout is the nodeunit's place in the rollout (spec.rollout only).
	rollout *unitDecision
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
	patch    func(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (C, error)
	// getLive reads a child from the apiserver (full managedFields).
	getLive func(ctx context.Context, namespace, name string) (C, error)
	// create makes a new child; it fails if the name is taken.
	create func(ctx context.Context, namespace string, cfg A) (C, error)
	// setUID makes an apply fail unless the object is the one we read.
	setUID func(cfg A, uid types.UID)
	remove func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error

	// recreatable: a child whose update hits immutable fields may be deleted
	// (orphaning its pods) and created anew (workloads: pods are re-adopted).
	recreatable bool

	// ready reports whether a child is up to date and ready.
	ready func(C) bool
	// healthy reports whether a child has fully rolled out: its spec
	// observed, every replica updated, ready and available (StatefulSets:
	// current revision = update revision); failure is a reason the child
	// itself gives for not getting there (ProgressDeadlineExceeded), or "".
	healthy func(C) bool
	failure func(C) string
	// strategy is the grid's spec.rollout; rollout its status.rollout and units.
	strategy func(G) *superedgev1.RolloutStrategy
	rollout  func(G) (*superedgev1.RolloutStatus, []superedgev1.NodeUnitStatus)
	// templateJSON is the JSON of the template named name.
	templateJSON func(G, string) ([]byte, error)
	// conditions reads the grid's current conditions.
	conditions func(G) []metav1.Condition
	// writeStatus builds the grid's status from its children and the
	// conditions, and writes it only if it differs.
	writeStatus func(ctx context.Context, grid G, children []child[C], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) error
}

// gridController runs one grid kind's workqueue.
type gridController[G, C object, A any] struct {
	ops      kindOps[G, C, A]
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder record.EventRecorder
	synced   []cache.InformerSynced
	grace    *deletionGrace
	// applied remembers each child's last apply until the cache shows it.
	applied appliedChildren
	// restrictedKeys: only node-restricted grid keys (gridkeytrust.go).
	restrictedKeys bool
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
		grace:    newDeletionGrace(deps.DeletionGracePeriod, deps.Clock),

		restrictedKeys: deps.RequireNodeRestrictedGridKeys,
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
		c.grace.forgetGrid(key)
		forgetGridReady(c.ops.kind, key.Namespace, key.Name)
		return nil // deleted: the garbage collector removes its children
	}
	if err != nil {
		return err
	}
	if grid.GetDeletionTimestamp() != nil {
		forgetGridReady(c.ops.kind, key.Namespace, key.Name)
		return nil
	}
	logger := klog.FromContext(ctx).WithValues(strings.ToLower(c.ops.kind), klog.KObj(grid))
	ctx = klog.NewContext(ctx, logger)

	gridKey := c.ops.gridKey(grid)
	candidates, err := c.ops.children(grid.GetNamespace(), grid.GetName())
	if err != nil {
		return err
	}
	reason, err := validGrid(grid.GetName(), gridKey)
	if err == nil && c.restrictedKeys {
		if err = untrustedGridKey(gridKey); err != nil {
			reason = ReasonUntrustedGridUniqKey
		}
	}
	if err != nil {
		// Bad spec: touch no child, only report (the status still lists them).
		var kept []child[C]
		for _, ch := range candidates {
			if metav1.IsControlledBy(ch, grid) {
				kept = append(kept, child[C]{unit: unit{value: c.valueOf(grid, ch.GetName()), name: ch.GetName()}, obj: ch})
			}
		}
		prev, _ := c.ops.rollout(grid)
		return c.finish(ctx, grid, kept, []problem{{reason, err.Error()}}, keptRollout(prev))
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
	plan := c.planRollout(grid, units, controlled)
	wanted := make(map[string]bool, len(units))
	kept := make([]child[C], 0, len(units))
	for _, u := range units {
		wanted[u.name] = true
		live, isOurs := controlled[u.name]
		if err := c.ops.validName(u.name); err != nil {
			problems = append(problems, problem{ReasonInvalidChildName,
				fmt.Sprintf("nodeunit %q skipped: %s name %q %v", u.value, c.ops.childKind, u.name, err)})
			if isOurs {
				kept = append(kept, child[C]{unit: u, obj: live}) // never delete what exists
			}
			continue
		}
		if isOurs && live.GetDeletionTimestamp() != nil {
			// Being deleted (re-created for an immutable field, or by someone):
			// created anew once it is gone.
			kept = append(kept, child[C]{unit: u, obj: live, pending: "re-create once the old object is gone"})
			c.queue.AddAfter(key, time.Second)
			continue
		}
		var decision *unitDecision
		if plan != nil {
			if d, ok := plan.units[u.value]; ok {
				decision = &d
				switch d.action {
				case actionKeep:
					if isOurs {
						kept = append(kept, child[C]{unit: u, obj: live, rollout: decision})
					}
					continue
				case actionLastGood:
					u.override = plan.lastGood[u.template]
				}
			}
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
				problems = append(problems, conflict(c.ops.childKind, u))
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
		var unknown unknownTemplateError
		var immutable immutableChange
		switch {
		case errors.Is(err, errRecreating):
			kept = append(kept, child[C]{unit: u, obj: live, pending: "re-create once the old object is gone"})
			c.queue.AddAfter(key, time.Second)
			continue
		case errors.As(err, &immutable):
			// Retrying cannot help: say which field and the way out.
			way := fmt.Sprintf("delete %s %s to have it re-created", c.ops.childKind, u.name)
			if immutable.selector {
				way += " (its pods are replaced: a new selector cannot adopt them)"
			}
			problems = append(problems, problem{ReasonImmutableField,
				fmt.Sprintf("nodeunit %q: %s %q: %v; %s", u.value, c.ops.childKind, u.name, err, way)})
			kept = append(kept, child[C]{unit: u, obj: live})
			continue
		case errors.As(err, &unknown):
			// A spec mistake: report it and keep the current child; retrying cannot help.
			problems = append(problems, problem{ReasonUnknownTemplate,
				fmt.Sprintf("nodeunit %q keeps its current %s: %v", u.value, c.ops.childKind, err)})
			if isOurs {
				kept = append(kept, child[C]{unit: u, obj: live})
			}
			continue
		case apierrors.IsAlreadyExists(err):
			// Someone created the name between our cache read and our create:
			// theirs, untouched; the retry sees it in the cache.
			problems = append(problems, conflict(c.ops.childKind, u))
			errs = append(errs, err)
			continue
		case err != nil:
			problems = append(problems, problem{ReasonApplyFailed, fmt.Sprintf("nodeunit %q: %s %q: %v", u.value, c.ops.childKind, u.name, err)})
			errs = append(errs, err)
			if isOurs {
				kept = append(kept, child[C]{unit: u, obj: live})
			}
			continue
		}
		if adopt {
			c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonAdopted, "Adopted %s %s", c.ops.childKind, u.name)
		}
		kept = append(kept, child[C]{unit: u, obj: obj, rollout: decision})
	}

	pending, err := c.removeVanished(ctx, grid, controlled, wanted)
	if err != nil {
		errs = append(errs, err)
	}
	kept = append(kept, pending...)

	var ro *superedgev1.RolloutStatus
	if plan != nil {
		ro = &plan.status
		c.rolloutEvents(grid, plan)
		if plan.requeue > 0 {
			c.queue.AddAfter(key, plan.requeue)
		}
	}
	errs = append(errs, c.finish(ctx, grid, kept, problems, ro))
	return errors.Join(errs...)
}

// valueOf is the nodeunit value in a child's name {grid}-{value}.
func (c *gridController[G, C, A]) valueOf(grid G, name string) string {
	return strings.TrimPrefix(name, grid.GetName()+"-")
}

// conflict reports a name taken by an object that is not the grid's.
func conflict(kind string, u unit) problem {
	return problem{ReasonNameConflict, fmt.Sprintf("nodeunit %q skipped: %s %q exists and belongs neither to this grid nor to its SuperEdge predecessor; it is left untouched", u.value, kind, u.name)}
}

// ensure makes the child match the grid unless it already does: a missing
// child is created (a create fails instead of taking over an object someone
// made meanwhile), an existing one gets its field ownership migrated once
// and is applied with its UID (the apply fails if the name now holds a
// different object).
func (c *gridController[G, C, A]) ensure(ctx context.Context, grid G, u unit, live C, hasLive bool) (C, error) {
	var zero C
	cfg, err := c.ops.desired(grid, u)
	if err != nil {
		return zero, err
	}
	logger := klog.FromContext(ctx)
	if !hasLive {
		obj, err := c.ops.create(ctx, grid.GetNamespace(), cfg)
		if err != nil {
			return zero, err
		}
		countChildWrite(c.ops.kind)
		logger.V(2).Info("Created child", "child", klog.KObj(obj), "nodeunit", u.value)
		return obj, nil
	}
	if metav1.IsControlledBy(live, grid) {
		want, err := toJSONMap(cfg)
		if err != nil {
			return zero, err
		}
		if c.applied.hashOf(live) == nestedString(want, "metadata", "annotations", AnnotationAppliedHash) &&
			live.GetAnnotations()[AnnotationAppliedHash] != c.applied.hashOf(live) {
			return live, nil // applied already; the cache has not caught up (its update event follows)
		}
		if ext, err := c.ops.extract(live); err == nil {
			if same, err := upToDate(live, want, ext); err == nil && same {
				return live, nil
			}
		}
	}
	if ownedByUpdate(live) {
		if err := c.migrateOwnership(ctx, live); err != nil {
			return zero, err
		}
	}
	c.ops.setUID(cfg, live.GetUID())
	obj, err := c.ops.apply(ctx, grid.GetNamespace(), cfg)
	if ic, ok := asImmutableChange(err); ok {
		if !ic.selector && selectorChanged(live, cfg) {
			ic.selector = true
			ic.fields = append(ic.fields, "spec.selector")
		}
		if c.ops.recreatable && !ic.selector && metav1.IsControlledBy(live, grid) {
			return zero, c.recreate(ctx, grid, live, ic)
		}
		return zero, ic
	}
	if err != nil {
		return zero, err
	}
	countChildWrite(c.ops.kind)
	c.applied.remember(live, obj)
	logger.V(2).Info("Applied child", "child", klog.KObj(obj), "nodeunit", u.value)
	return obj, nil
}

// errRecreating: the child was deleted (orphaning its pods) to be created
// anew with a field that cannot change in place.
var errRecreating = errors.New("re-creating")

// recreate deletes a child whose wanted spec changes immutable fields,
// orphaning its pods; the next sync creates it anew and the workload
// controller adopts the pods (same selector), so none restarts unless the
// pod template changed too.
func (c *gridController[G, C, A]) recreate(ctx context.Context, grid G, live C, ic immutableChange) error {
	uid := live.GetUID()
	orphan := metav1.DeletePropagationOrphan
	err := c.ops.remove(ctx, live.GetNamespace(), live.GetName(), metav1.DeleteOptions{PropagationPolicy: &orphan, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s to re-create it: %w", c.ops.childKind, live.GetName(), err)
	}
	klog.FromContext(ctx).Info("Re-creating child for fields that cannot change in place", "child", klog.KObj(live), "fields", ic.fields)
	c.recorder.Eventf(grid, corev1.EventTypeNormal, ReasonRecreating, "Re-creating %s %s: %v; its pods are kept and adopted by the new one",
		c.ops.childKind, live.GetName(), ic)
	return errRecreating
}
