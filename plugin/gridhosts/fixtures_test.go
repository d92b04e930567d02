package gridhosts

import "github.com/servicegroup/servicegroup/plugin/gridhosts/internal/fixtures"

// The objects the tests feed gridhosts (package fixtures, shared with the
// sub-packages' tests).
var (
	newGrid    = fixtures.Grid
	newSet     = fixtures.Set
	newPod     = fixtures.Pod
	setPodIPs  = fixtures.SetPodIPs
	newService = fixtures.Service
	newNode    = fixtures.Node
	newSlice   = fixtures.Slice
)

type testEndpoint = fixtures.Endpoint
