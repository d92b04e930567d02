package informers

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/nodelabels"
)

// gridCRDRecheck is how often a missing StatefulSetGrid CRD is asked for
// again: as often as the node label source looks for summaries.
const gridCRDRecheck = nodelabels.DefaultRecheck

// watchGridCRD, in node mode (where no StatefulSetGrid is watched), tells
// src whether the StatefulSetGrid CRD is served, from one discovery request,
// so readiness and the start-up line say "CRD not installed" as in clients
// mode. Failed requests are retried with client-go's backoff (at most 30 s
// apart); while the CRD is not installed it is asked again every
// gridCRDRecheck, until it is served. The grids themselves are read from
// their children, with or without it.
func watchGridCRD(ctx context.Context, d discovery.DiscoveryInterface, src *source, present func()) {
	backoff := wait.Backoff{Duration: time.Second, Cap: 30 * time.Second, Steps: 30, Factor: 2, Jitter: 0.1}
	for {
		list, err := d.ServerResourcesForGroupVersion(superedgev1.SchemeGroupVersion.String())
		switch {
		case err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "statefulsetgrids" }):
			src.absent.Store(false)
			present()
			return
		case err == nil:
			src.absent.Store(true) // the group without this CRD
		default:
			src.onError(ctx, nil, err)
		}
		delay := backoff.Step()
		if src.absent.Load() {
			delay = gridCRDRecheck
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}
