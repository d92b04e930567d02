package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// gridController runs one grid kind's workqueue.
type gridController[G, C object, A childConfig[A]] struct {
	kind      string // the grid kind, e.g. "DeploymentGrid"
	childKind string // e.g. "Deployment"
	grids     gridKind[G, C, A]
	// rollouts is nil for a kind without spec.rollout (ServiceGrid).
	rollouts rolloutKind[G, C]
	store    kindStore[G, C, A]
	// recreatable: a child whose update hits immutable fields may be deleted
	// (orphaning its pods) and created anew (workloads: pods are re-adopted).
	recreatable bool

	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder record.EventRecorder
	synced   []cache.InformerSynced
	grace    *deletionGrace
	// applied remembers each child's last apply until the cache shows it.
	applied appliedChildren
	// verified remembers which child versions match which desired hash.
	verified verifiedChildren
	// hashes remembers each unit's desired applied-hash per grid version.
	hashes desiredHashes
	// statusWrites remembers the last status write until the cache shows it.
	statusWrites statusWrites[G]
	// created remembers each created child until the cache shows it.
	created createdChildren[C]
	// statusDelay holds back status changes no sync decides from.
	statusDelay statusDelay
	// restrictedKeys: only node-restricted grid keys (gridkeytrust.go).
	restrictedKeys bool
}

func newGridController[G, C object, A childConfig[A]](deps Deps, kind, childKind string, grids gridKind[G, C, A], store kindStore[G, C, A]) *gridController[G, C, A] {
	return &gridController[G, C, A]{
		kind:      kind,
		childKind: childKind,
		grids:     grids,
		store:     store,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{
				Name:            strings.ToLower(kind),
				MetricsProvider: deps.MetricsProvider,
			}),
		recorder:       deps.Recorder,
		grace:          newDeletionGrace(deps.DeletionGracePeriod, deps.Clock),
		statusDelay:    statusDelay{delay: deps.GridStatusDelay},
		restrictedKeys: deps.RequireNodeRestrictedGridKeys,
	}
}

// run processes the queue with workers until ctx ends, then waits for them.
func (c *gridController[G, C, A]) run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", strings.ToLower(c.kind))
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
	observeReconcile(c.kind, time.Since(start), err)
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing for later retry", "kind", c.kind, "objectReference", key)
	c.queue.AddRateLimited(key)
	return true
}
