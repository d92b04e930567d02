// Package explain answers an operator's questions about one node's view of
// the service group: which endpoints of a Service the wrapper serves there and
// why, what a unified StatefulSetGrid name resolves to, and what state each
// nodeunit of a grid is in. It holds no decision of its own: topology
// choices come from package topology (topology.FilterEndpointSlices), the
// code the wrapper runs, and unified names from package gridname, the code
// gridhosts answers with. kubectl grid (cmd/kubectl-grid) prints its reports.
package explain
