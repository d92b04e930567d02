package wrapper

import "github.com/servicegroup/servicegroup/topology"

// FilterEndpointSlices is topology.FilterEndpointSlices, kept for callers
// that still name it here (plugin/gridhosts/usable_test.go); new code calls
// package topology.
var FilterEndpointSlices = topology.FilterEndpointSlices
