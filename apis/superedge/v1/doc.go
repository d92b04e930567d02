// Package v1 holds the superedge.io/v1 API: DeploymentGrid, StatefulSetGrid
// and ServiceGrid, wire-compatible with the original SuperEdge manifests.
//
// +k8s:deepcopy-gen=package
// +groupName=superedge.io
package v1
