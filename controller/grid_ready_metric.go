package controller

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
)

// gridReady mirrors each grid's Ready condition, so an alert sees from the
// cloud which grids are not serving every nodeunit.
var gridReady = metric.GaugeVec("grid_ready",
	"1 while the grid's Ready condition is True, 0 while it is False, by kind, namespace and grid; a deleted grid's series goes.",
	"kind", "namespace", "grid")

func recordGridReady(kind, namespace, name string, ready bool) {
	v := 0.0
	if ready {
		v = 1
	}
	gridReady.WithLabelValues(kind, namespace, name).Set(v)
}

func forgetGridReady(kind, namespace, name string) {
	gridReady.DeleteLabelValues(kind, namespace, name)
	recordNodeunitPods(kind, namespace, name, nil)
}

// nodeunitReadyPods is each nodeunit's ready pods of a workload grid: the
// endpoints a ServiceGrid over the grid's pods has in that nodeunit.
var nodeunitReadyPods = metric.GaugeVec("nodeunit_ready_pods",
	"Ready pods of each nodeunit's child of a DeploymentGrid or StatefulSetGrid, by kind, namespace, grid and nodeunit; a nodeunit's series goes with its child, a grid's with the grid.",
	"kind", "namespace", "grid", "nodeunit")

// unitsRecorded are the nodeunits each grid has series of, so a nodeunit
// that went away loses its series without a gap in the others'.
var (
	unitsMu       sync.Mutex
	unitsRecorded = map[[3]string][]string{}
)

// recordNodeunitPods sets the grid's nodeunit series to ready (by
// nodeunit) and drops the others; ServiceGrids have none.
func recordNodeunitPods(kind, namespace, name string, ready map[string]int32) {
	unitsMu.Lock()
	defer unitsMu.Unlock()
	grid := [3]string{kind, namespace, name}
	for _, unit := range unitsRecorded[grid] {
		if _, ok := ready[unit]; !ok {
			nodeunitReadyPods.DeleteLabelValues(kind, namespace, name, unit)
		}
	}
	units := make([]string, 0, len(ready))
	for unit, n := range ready {
		nodeunitReadyPods.WithLabelValues(kind, namespace, name, unit).Set(float64(n))
		units = append(units, unit)
	}
	if len(units) == 0 {
		delete(unitsRecorded, grid)
		return
	}
	unitsRecorded[grid] = units
}

// readyPodsOf is a workload child's ready pods; ok is false for others.
func readyPodsOf(obj any) (int32, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Status.ReadyReplicas, true
	case *appsv1.StatefulSet:
		return o.Status.ReadyReplicas, true
	}
	return 0, false
}
