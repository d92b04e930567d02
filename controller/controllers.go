// Package controller is the application-grid-controller: one workqueue
// controller per grid kind (DeploymentGrid, StatefulSetGrid, ServiceGrid)
// keeping each grid's children in line with its template and the cluster's
// nodeunits, plus the process around them (CRDs, leader election, metrics).
package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridinformers "github.com/servicegroup/servicegroup/client/informers/externalversions"
)

// Deps are what the controllers are built from. Build the informer factories
// with Transform / TransformGrids; start them after NewControllers.
type Deps struct {
	Kube          kubernetes.Interface
	Grids         versioned.Interface
	KubeInformers informers.SharedInformerFactory
	GridInformers gridinformers.SharedInformerFactory
	Recorder      record.EventRecorder
	// MetricsProvider receives the workqueue metrics (default: client-go's
	// global provider, component-base's, served by Registry()).
	MetricsProvider workqueue.MetricsProvider
	// DeletionGracePeriod is how long a nodeunit must have had no nodes
	// before its child is deleted (0: at once).
	DeletionGracePeriod time.Duration
	// Clock measures the grace period (default: the real clock).
	Clock clock.Clock
	// RequireNodeRestrictedGridKeys accepts only grid keys under
	// node-restriction.kubernetes.io/, which a node cannot set on itself.
	RequireNodeRestrictedGridKeys bool
	// ZoneFromGridKey is the grid key whose value the zone-label writer
	// keeps in every node's topology.kubernetes.io/zone, and the only key
	// native-mode ServiceGrids may use ("": no zone is written; the writer
	// still removes the zones it wrote).
	ZoneFromGridKey string
	// LabelSummaryDelay is how long the NodeLabelSummary writer lets changes
	// gather before it writes them (0: at once; Options' default is
	// DefaultLabelSummaryDelay).
	LabelSummaryDelay time.Duration
	// GridStatusDelay is how long a grid's status change that no sync
	// decides from (counts, readiness) waits for later ones before it is
	// written (0: at once; Options' default is DefaultGridStatusDelay).
	GridStatusDelay time.Duration
}

// Controllers are the three grid controllers, the NodeLabelSummary writer
// and the zone-label writer.
type Controllers struct {
	runners []func(ctx context.Context, workers int)
}

// NewControllers registers the three controllers on the informers in deps.
func NewControllers(deps Deps) (*Controllers, error) {
	Registry() // its error series exist at 0 from the start
	c := &Controllers{}
	for _, build := range []func(Deps) (runner, error){
		asRunner(newDeploymentGridController), asRunner(newStatefulSetGridController),
		asRunner(newServiceGridController), asRunner(newLabelSummaryWriter), asRunner(newZoneLabelWriter),
	} {
		r, err := build(deps)
		if err != nil {
			return nil, err
		}
		c.runners = append(c.runners, r.run)
	}
	return c, nil
}

// runner is one controller: run works until ctx ends.
type runner interface {
	run(ctx context.Context, workers int)
}

// asRunner lets the constructors of differently typed controllers stand in
// one list.
func asRunner[R runner](build func(Deps) (R, error)) func(Deps) (runner, error) {
	return func(d Deps) (runner, error) { return build(d) }
}

// Run runs every controller with workers workers each until ctx ends and
// returns once they all stopped.
func (c *Controllers) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for _, run := range c.runners {
		wg.Go(func() { run(ctx, workers) })
	}
	wg.Wait()
}
